// binary.cu: the binary ops on the module's dtype VD (a -D option), as
// tensor-tensor kernels (bin_*), tensor-scalar kernels computing in the
// compute type (sca_*), and, for integer and bool dtypes, tensor-scalar
// kernels computing in double for fractional scalars (scf_*).

template <class C> struct Unsigned { typedef C T; };
template <> struct Unsigned<int> { typedef unsigned T; };
template <> struct Unsigned<i64> { typedef u64 T; };

// Float semantics (also used by scf_* on integer dtypes, in double).
struct FAdd { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return a + b; } };
struct FSub { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return a - b; } };
struct FMul { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return a * b; } };
struct FDiv { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return a / b; } };
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }
struct FPow { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return m_pow(a, b); } };
struct FMax { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return (a > b || a != a) ? a : b; } };
struct FMin { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return (a < b || a != a) ? a : b; } };

// The fused float ops: activation gradients and bias plus activation,
// with the exact GELU of unary.cu (erf-based).
__device__ __forceinline__ float b_erf(float x) { return erff(x); }
__device__ __forceinline__ double b_erf(double x) { return erf(x); }
__device__ __forceinline__ float b_exp(float x) { return expf(x); }
__device__ __forceinline__ double b_exp(double x) { return exp(x); }
template <class C> __device__ __forceinline__ C gelu_c(C x) { return (C)0.5 * x * ((C)1 + b_erf(x * (C)0.7071067811865476)); }
template <class C> __device__ __forceinline__ C gelu_grad_c(C x) {
	return (C)0.5 * ((C)1 + b_erf(x * (C)0.7071067811865476)) + x * (C)0.3989422804014327 * b_exp((C)-0.5 * x * x);
}
struct FReluBackward { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return b > 0 ? a : (C)0; } };
struct FGeluBackward { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return a * gelu_grad_c(b); } };
struct FAddRelu {
	template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) {
		C s = a + b;
		return s < 0 ? (C)0 : s;
	}
};
struct FAddGelu { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return gelu_c(a + b); } };

// Integer semantics: wrap-around arithmetic, truncating division (division
// by zero is an error), integer powers.
struct IAdd {
	template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) {
		typedef typename Unsigned<C>::T U;
		return (C)((U)a + (U)b);
	}
};
struct ISub {
	template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) {
		typedef typename Unsigned<C>::T U;
		return (C)((U)a - (U)b);
	}
};
struct IMul {
	template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) {
		typedef typename Unsigned<C>::T U;
		return (C)((U)a * (U)b);
	}
};
struct IDiv {
	template <class C> static __device__ __forceinline__ C f(C a, C b, i64* err) {
		if (b == 0) {
			set_error(err, ERR_INT_DIV_ZERO, (i64)a, 0);
			return 0;
		}
		if (b == -1) return (C)((typename Unsigned<C>::T)0 - (typename Unsigned<C>::T)a);
		return a / b;
	}
};
template <class I> __device__ __forceinline__ I ipow(I x, I e) {
	if (e < 0) {
		if (x == 1) return 1;
		if (x == -1) return (e % 2 == 0) ? 1 : -1;
		return 0;
	}
	typedef typename Unsigned<I>::T U;
	U r = 1, ux = (U)x;
	while (e > 0) {
		if (e & 1) r *= ux;
		ux *= ux;
		e >>= 1;
	}
	return (I)r;
}
struct IPow { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return ipow<C>(a, b); } };
struct IMax { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return a > b ? a : b; } };
struct IMin { template <class C> static __device__ __forceinline__ C f(C a, C b, i64*) { return a < b ? a : b; } };

// Comparisons and logical ops, for every type.
struct CEq { template <class C> static __device__ __forceinline__ int f(C a, C b, i64*) { return a == b; } };
struct CNe { template <class C> static __device__ __forceinline__ int f(C a, C b, i64*) { return a != b; } };
struct CLt { template <class C> static __device__ __forceinline__ int f(C a, C b, i64*) { return a < b; } };
struct CLe { template <class C> static __device__ __forceinline__ int f(C a, C b, i64*) { return a <= b; } };
struct CGt { template <class C> static __device__ __forceinline__ int f(C a, C b, i64*) { return a > b; } };
struct CGe { template <class C> static __device__ __forceinline__ int f(C a, C b, i64*) { return a >= b; } };
struct CAnd { template <class C> static __device__ __forceinline__ int f(C a, C b, i64*) { return a != 0 && b != 0; } };
struct COr { template <class C> static __device__ __forceinline__ int f(C a, C b, i64*) { return a != 0 || b != 0; } };

typedef DT<VD>::S S;
typedef DT<VD>::C CT;

template <class OP, int DO> struct BF {
	i64* err;
	__device__ __forceinline__ typename DT<DO>::S operator()(S a, S b) const {
		return st<DO>(OP::f(ldc<VD>(a), ldc<VD>(b), err));
	}
};
template <class OP, int DO> struct SF {
	CT s;
	int rev;
	i64* err;
	__device__ __forceinline__ typename DT<DO>::S operator()(S a) const {
		CT x = ldc<VD>(a);
		return st<DO>(rev ? OP::f(s, x, err) : OP::f(x, s, err));
	}
};
template <class OP, int DO> struct SFD {
	double s;
	int rev;
	i64* err;
	__device__ __forceinline__ typename DT<DO>::S operator()(S a) const {
		double x = (double)ldc<VD>(a);
		return st<DO>(rev ? OP::f(s, x, err) : OP::f(x, s, err));
	}
};

// to_ct converts the scalar to the compute type (integers: truncated).
__device__ __forceinline__ CT to_ct(double s) { return DT<VD>::isFloat ? (CT)s : (CT)(i64)s; }

#define BIN(NAME, OP, DO)                                                                                           \
	extern "C" __global__ void bin_##NAME##_c(DT<DO>::S* o, const S* a, const S* b, i64* err, i64 n, int vec) { \
		ew2c(o, a, b, n, vec, BF<OP, DO>{err});                                                              \
	}                                                                                                           \
	extern "C" __global__ void bin_##NAME##_s(DT<DO>::S* o, const S* a, const S* b, i64* err, i64 n,            \
						  IDX_PARAMS3) {                                                    \
		IDX_BUILD3;                                                                                         \
		ew2s(o, a, b, n, ix, BF<OP, DO>{err});                                                              \
	}                                                                                                           \
	extern "C" __global__ void bin_##NAME##_r(DT<DO>::S* o, const S* a, const S* b, i64* err, i64 n, i64 inner, \
						  int vec, int bca) {                                               \
		ew2r(o, a, b, n, inner, vec, bca, BF<OP, DO>{err});                                                 \
	}                                                                                                           \
	extern "C" __global__ void bin_##NAME##_t(DT<DO>::S* o, const S* a, const S* b, i64* err, i64 rows, i64 cols, \
						  int bta) {                                                        \
		ew2t(o, a, b, rows, cols, bta, BF<OP, DO>{err});                                                    \
	}                                                                                                           \
	extern "C" __global__ void sca_##NAME##_c(DT<DO>::S* o, const S* a, i64* err, double s, int rev, i64 n,    \
						  int vec) {                                                        \
		ew1c(o, a, n, vec, SF<OP, DO>{to_ct(s), rev, err});                                                 \
	}                                                                                                           \
	extern "C" __global__ void sca_##NAME##_s(DT<DO>::S* o, const S* a, i64* err, double s, int rev, i64 n,    \
						  IDX_PARAMS2) {                                                    \
		IDX_BUILD2;                                                                                         \
		ew1s(o, a, n, ix, SF<OP, DO>{to_ct(s), rev, err});                                                  \
	}

#define SCF(NAME, OP, DO)                                                                                           \
	extern "C" __global__ void scf_##NAME##_c(DT<DO>::S* o, const S* a, i64* err, double s, int rev, i64 n,    \
						  int vec) {                                                        \
		ew1c(o, a, n, vec, SFD<OP, DO>{s, rev, err});                                                       \
	}                                                                                                           \
	extern "C" __global__ void scf_##NAME##_s(DT<DO>::S* o, const S* a, i64* err, double s, int rev, i64 n,    \
						  IDX_PARAMS2) {                                                    \
		IDX_BUILD2;                                                                                         \
		ew1s(o, a, n, ix, SFD<OP, DO>{s, rev, err});                                                        \
	}

#if VD == DT_F32 || VD == DT_F64 || VD == DT_F16 || VD == DT_BF16
#if defined(K_ALL) || defined(K_add)
BIN(add, FAdd, VD)
#endif
#if defined(K_ALL) || defined(K_sub)
BIN(sub, FSub, VD)
#endif
#if defined(K_ALL) || defined(K_mul)
BIN(mul, FMul, VD)
#endif
#if defined(K_ALL) || defined(K_div)
BIN(div, FDiv, VD)
#endif
#if defined(K_ALL) || defined(K_pow)
BIN(pow, FPow, VD)
#endif
#if defined(K_ALL) || defined(K_maximum)
BIN(maximum, FMax, VD)
#endif
#if defined(K_ALL) || defined(K_minimum)
BIN(minimum, FMin, VD)
#endif
#if defined(K_ALL) || defined(K_eq)
BIN(eq, CEq, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_ne)
BIN(ne, CNe, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_lt)
BIN(lt, CLt, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_le)
BIN(le, CLe, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_gt)
BIN(gt, CGt, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_ge)
BIN(ge, CGe, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_logical_and)
BIN(logical_and, CAnd, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_logical_or)
BIN(logical_or, COr, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_relu_backward)
BIN(relu_backward, FReluBackward, VD)
#endif
#if defined(K_ALL) || defined(K_gelu_backward)
BIN(gelu_backward, FGeluBackward, VD)
#endif
#if defined(K_ALL) || defined(K_add_relu)
BIN(add_relu, FAddRelu, VD)
#endif
#if defined(K_ALL) || defined(K_add_gelu)
BIN(add_gelu, FAddGelu, VD)
#endif
#else
#if defined(K_ALL) || defined(K_add)
BIN(add, IAdd, VD)
#endif
#if defined(K_ALL) || defined(K_mul)
BIN(mul, IMul, VD)
#endif
#if defined(K_ALL) || defined(K_maximum)
BIN(maximum, IMax, VD)
#endif
#if defined(K_ALL) || defined(K_minimum)
BIN(minimum, IMin, VD)
#endif
#if defined(K_ALL) || defined(K_eq)
BIN(eq, CEq, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_ne)
BIN(ne, CNe, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_lt)
BIN(lt, CLt, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_le)
BIN(le, CLe, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_gt)
BIN(gt, CGt, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_ge)
BIN(ge, CGe, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_logical_and)
BIN(logical_and, CAnd, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_logical_or)
BIN(logical_or, COr, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_add)
SCF(add, FAdd, VD)
#endif
#if defined(K_ALL) || defined(K_mul)
SCF(mul, FMul, VD)
#endif
#if defined(K_ALL) || defined(K_maximum)
SCF(maximum, FMax, VD)
#endif
#if defined(K_ALL) || defined(K_minimum)
SCF(minimum, FMin, VD)
#endif
#if defined(K_ALL) || defined(K_eq)
SCF(eq, CEq, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_ne)
SCF(ne, CNe, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_lt)
SCF(lt, CLt, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_le)
SCF(le, CLe, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_gt)
SCF(gt, CGt, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_ge)
SCF(ge, CGe, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_logical_and)
SCF(logical_and, CAnd, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_logical_or)
SCF(logical_or, COr, DT_BOOL)
#endif
#if VD != DT_BOOL
#if defined(K_ALL) || defined(K_sub)
BIN(sub, ISub, VD)
#endif
#if defined(K_ALL) || defined(K_div)
BIN(div, IDiv, VD)
#endif
#if defined(K_ALL) || defined(K_pow)
BIN(pow, IPow, VD)
#endif
#if defined(K_ALL) || defined(K_sub)
SCF(sub, FSub, VD)
#endif
#if defined(K_ALL) || defined(K_div)
SCF(div, FDiv, VD)
#endif
#if defined(K_ALL) || defined(K_pow)
SCF(pow, FPow, VD)
#endif
#endif
#endif
