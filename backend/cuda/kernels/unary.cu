// unary.cu: the unary ops on the module's dtype VD (a -D option). Float
// types compute in their compute type: float32, float16 and bfloat16 in
// float (CUDA's float functions are within 1 to 4 ulp), float64 in double.

#define INV_SQRT2 0.7071067811865476
#define SQRT_2_OVER_PI 0.7978845608028654
#define INV_SQRT_2PI 0.3989422804014327

// Math functions on the compute type: the float versions for float
// (float32, float16, bfloat16), the double ones for double.
#define MATH1(NAME)                                                                       \
	__device__ __forceinline__ float m_##NAME(float x) { return NAME##f(x); }         \
	__device__ __forceinline__ double m_##NAME(double x) { return NAME(x); }
MATH1(exp)
MATH1(log)
MATH1(log1p)
MATH1(expm1)
MATH1(sqrt)
MATH1(sin)
MATH1(cos)
MATH1(tanh)
MATH1(erf)
MATH1(floor)
MATH1(ceil)
MATH1(rint)
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }

template <class C> __device__ __forceinline__ C sigmoid_c(C x) {
	if (x >= 0) return (C)1 / ((C)1 + m_exp(-x));
	C e = m_exp(x);
	return e / ((C)1 + e);
}

struct UNeg { template <class C> static __device__ __forceinline__ C f(C x, double) { return -x; } };
struct UAbs { template <class C> static __device__ __forceinline__ C f(C x, double) { return x < 0 ? (C)-x : (x == 0 ? (C)0 : x); } };
struct USign {
	template <class C> static __device__ __forceinline__ C f(C x, double) {
		if (x > 0) return (C)1;
		if (x < 0) return (C)-1;
		return (C)0; // zero of either sign, and NaN, as in PyTorch
	}
};
struct USquare { template <class C> static __device__ __forceinline__ C f(C x, double) { return x * x; } };
struct UReciprocal { template <class C> static __device__ __forceinline__ C f(C x, double) { return (C)1 / x; } };
struct URelu { template <class C> static __device__ __forceinline__ C f(C x, double) { return x < 0 ? (C)0 : x; } };
struct ULeakyRelu { template <class C> static __device__ __forceinline__ C f(C x, double p) { return x < 0 ? x * (C)p : x; } };
struct UIsNaN { template <class C> static __device__ __forceinline__ int f(C x, double) { return x != x; } };
struct ULogicalNot { template <class C> static __device__ __forceinline__ int f(C x, double) { return x == 0; } };
struct UIdent { template <class C> static __device__ __forceinline__ C f(C x, double) { return x; } };
struct UPowScalar {
	template <class C> static __device__ __forceinline__ C f(C x, double p) {
		if (p == 2) return x * x;
		if (p == 1) return x;
		return m_pow(x, (C)p);
	}
};

#define UD(NAME, EXPR)                                                                     \
	struct NAME {                                                                      \
		template <class C> static __device__ __forceinline__ C f(C x, double) {    \
			return (C)(EXPR);                                                  \
		}                                                                          \
	};
UD(UExp, m_exp(x))
UD(ULog, m_log(x))
UD(ULog1p, m_log1p(x))
UD(UExpm1, m_expm1(x))
UD(USqrt, m_sqrt(x))
UD(URsqrt, (C)1 / m_sqrt(x))
UD(USin, m_sin(x))
UD(UCos, m_cos(x))
UD(UTanh, m_tanh(x))
UD(USigmoid, sigmoid_c(x))
UD(UGelu, (C)0.5 * x * ((C)1 + m_erf(x * (C)INV_SQRT2)))
UD(UGeluTanh, (C)0.5 * x * ((C)1 + m_tanh((C)SQRT_2_OVER_PI * (x + (C)0.044715 * x * x * x))))
UD(UGeluGrad, (C)0.5 * ((C)1 + m_erf(x * (C)INV_SQRT2)) + x * (C)INV_SQRT_2PI * m_exp((C)-0.5 * x * x))
UD(USilu, x * sigmoid_c(x))
UD(UErf, m_erf(x))
UD(UFloor, m_floor(x))
UD(UCeil, m_ceil(x))
UD(URound, m_rint(x))

// ipow is x**e with wrap-around; negative exponents follow C integer
// division (the CPU backend's rule).
template <class I> __device__ __forceinline__ I ipow(I x, I e) {
	if (e < 0) {
		if (x == 1) return 1;
		if (x == -1) return (e % 2 == 0) ? 1 : -1;
		return 0;
	}
	I r = 1;
	while (e > 0) {
		if (e & 1) r *= x;
		x *= x;
		e >>= 1;
	}
	return r;
}
struct UIPowScalar {
	template <class C> static __device__ __forceinline__ C f(C x, double p) { return ipow<C>(x, (C)(i64)p); }
};
struct UIAbs { template <class C> static __device__ __forceinline__ C f(C x, double) { return x < 0 ? -x : x; } };
struct UISign { template <class C> static __device__ __forceinline__ C f(C x, double) { return (C)((x > 0) - (x < 0)); } };
struct UIRelu { template <class C> static __device__ __forceinline__ C f(C x, double) { return x < 0 ? (C)0 : x; } };
struct UIIsNaN { template <class C> static __device__ __forceinline__ int f(C, double) { return 0; } };

template <class OP, int DO> struct UF {
	double p;
	__device__ __forceinline__ typename DT<DO>::S operator()(typename DT<VD>::S x) const {
		return st<DO>(OP::f(ldc<VD>(x), p));
	}
};

#define UN(NAME, OP, DO)                                                                                           \
	extern "C" __global__ void un_##NAME##_c(DT<DO>::S* o, const DT<VD>::S* a, double p, i64 n, int vec) {     \
		ew1c(o, a, n, vec, UF<OP, DO>{p});                                                                 \
	}                                                                                                          \
	extern "C" __global__ void un_##NAME##_s(DT<DO>::S* o, const DT<VD>::S* a, double p, i64 n, IDX_PARAMS2) { \
		IDX_BUILD2;                                                                                        \
		ew1s(o, a, n, ix, UF<OP, DO>{p});                                                                  \
	}

#if VD == DT_F32 || VD == DT_F64 || VD == DT_F16 || VD == DT_BF16
#if defined(K_ALL) || defined(K_neg)
UN(neg, UNeg, VD)
#endif
#if defined(K_ALL) || defined(K_abs)
UN(abs, UAbs, VD)
#endif
#if defined(K_ALL) || defined(K_sign)
UN(sign, USign, VD)
#endif
#if defined(K_ALL) || defined(K_exp)
UN(exp, UExp, VD)
#endif
#if defined(K_ALL) || defined(K_log)
UN(log, ULog, VD)
#endif
#if defined(K_ALL) || defined(K_log1p)
UN(log1p, ULog1p, VD)
#endif
#if defined(K_ALL) || defined(K_expm1)
UN(expm1, UExpm1, VD)
#endif
#if defined(K_ALL) || defined(K_sqrt)
UN(sqrt, USqrt, VD)
#endif
#if defined(K_ALL) || defined(K_rsqrt)
UN(rsqrt, URsqrt, VD)
#endif
#if defined(K_ALL) || defined(K_square)
UN(square, USquare, VD)
#endif
#if defined(K_ALL) || defined(K_reciprocal)
UN(reciprocal, UReciprocal, VD)
#endif
#if defined(K_ALL) || defined(K_sin)
UN(sin, USin, VD)
#endif
#if defined(K_ALL) || defined(K_cos)
UN(cos, UCos, VD)
#endif
#if defined(K_ALL) || defined(K_tanh)
UN(tanh, UTanh, VD)
#endif
#if defined(K_ALL) || defined(K_sigmoid)
UN(sigmoid, USigmoid, VD)
#endif
#if defined(K_ALL) || defined(K_relu)
UN(relu, URelu, VD)
#endif
#if defined(K_ALL) || defined(K_gelu)
UN(gelu, UGelu, VD)
#endif
#if defined(K_ALL) || defined(K_gelu_tanh)
UN(gelu_tanh, UGeluTanh, VD)
#endif
#if defined(K_ALL) || defined(K_gelu_grad)
UN(gelu_grad, UGeluGrad, VD)
#endif
#if defined(K_ALL) || defined(K_silu)
UN(silu, USilu, VD)
#endif
#if defined(K_ALL) || defined(K_erf)
UN(erf, UErf, VD)
#endif
#if defined(K_ALL) || defined(K_floor)
UN(floor, UFloor, VD)
#endif
#if defined(K_ALL) || defined(K_ceil)
UN(ceil, UCeil, VD)
#endif
#if defined(K_ALL) || defined(K_round)
UN(round, URound, VD)
#endif
#if defined(K_ALL) || defined(K_pow_scalar)
UN(pow_scalar, UPowScalar, VD)
#endif
#if defined(K_ALL) || defined(K_leaky_relu)
UN(leaky_relu, ULeakyRelu, VD)
#endif
#if defined(K_ALL) || defined(K_isnan)
UN(isnan, UIsNaN, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_logical_not)
UN(logical_not, ULogicalNot, DT_BOOL)
#endif
#else
#if VD != DT_BOOL
#if defined(K_ALL) || defined(K_neg)
UN(neg, UNeg, VD)
#endif
#if defined(K_ALL) || defined(K_pow_scalar)
UN(pow_scalar, UIPowScalar, VD)
#endif
#endif
#if defined(K_ALL) || defined(K_abs)
UN(abs, UIAbs, VD)
#endif
#if defined(K_ALL) || defined(K_sign)
UN(sign, UISign, VD)
#endif
#if defined(K_ALL) || defined(K_square)
UN(square, USquare, VD)
#endif
#if defined(K_ALL) || defined(K_relu)
UN(relu, UIRelu, VD)
#endif
#if defined(K_ALL) || defined(K_floor)
UN(floor, UIdent, VD)
#endif
#if defined(K_ALL) || defined(K_ceil)
UN(ceil, UIdent, VD)
#endif
#if defined(K_ALL) || defined(K_round)
UN(round, UIdent, VD)
#endif
#if defined(K_ALL) || defined(K_isnan)
UN(isnan, UIIsNaN, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_logical_not)
UN(logical_not, ULogicalNot, DT_BOOL)
#endif
#endif
