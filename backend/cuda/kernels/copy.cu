// copy.cu: Copy with a dtype conversion, from the module's source dtype SD
// (a -D option) to each destination dtype. Values pass through the CPU
// backend's copy kind: float for float32, float16 and bfloat16, double for
// float64, 64-bit integers for the integer types and bool.

template <int D> struct CopyKind { typedef float T; };
template <> struct CopyKind<DT_F64> { typedef double T; };
template <> struct CopyKind<DT_I32> { typedef i64 T; };
template <> struct CopyKind<DT_I64> { typedef i64 T; };
template <> struct CopyKind<DT_BOOL> { typedef i64 T; };
template <> struct CopyKind<DT_I8> { typedef i64 T; };

template <int DD> struct Conv {
	__device__ __forceinline__ typename DT<DD>::S operator()(typename DT<SD>::S x) const {
		return st<DD>((typename CopyKind<SD>::T)ldc<SD>(x));
	}
};

#define COPY_KERNELS(NAME, DD)                                                                                   \
	extern "C" __global__ void cp_##NAME##_c(DT<DD>::S* o, const DT<SD>::S* a, i64 n, int vec) {             \
		ew1c(o, a, n, vec, Conv<DD>());                                                                  \
	}                                                                                                        \
	extern "C" __global__ void cp_##NAME##_s(DT<DD>::S* o, const DT<SD>::S* a, i64 n, IDX_PARAMS2) {         \
		IDX_BUILD2;                                                                                      \
		ew1s(o, a, n, ix, Conv<DD>());                                                                   \
	}                                                                                                        \
	extern "C" __global__ void cp_##NAME##_t(DT<DD>::S* o, const DT<SD>::S* a, i64 rows, i64 cols) {         \
		ew1t(o, a, rows, cols, Conv<DD>());                                                              \
	}

#if defined(K_ALL) || defined(K_float32)
COPY_KERNELS(float32, DT_F32)
#endif
#if defined(K_ALL) || defined(K_float64)
COPY_KERNELS(float64, DT_F64)
#endif
#if defined(K_ALL) || defined(K_float16)
COPY_KERNELS(float16, DT_F16)
#endif
#if defined(K_ALL) || defined(K_bfloat16)
COPY_KERNELS(bfloat16, DT_BF16)
#endif
#if defined(K_ALL) || defined(K_int32)
COPY_KERNELS(int32, DT_I32)
#endif
#if defined(K_ALL) || defined(K_int64)
COPY_KERNELS(int64, DT_I64)
#endif
#if defined(K_ALL) || defined(K_bool)
COPY_KERNELS(bool, DT_BOOL)
#endif
#if defined(K_ALL) || defined(K_int8)
COPY_KERNELS(int8, DT_I8)
#endif
