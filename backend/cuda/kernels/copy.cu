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

// cp_NAME_multi: cp_NAME_c for nt <= CP_MAX contiguous pairs in one launch
// (a model's weights cast to a lower precision, or their gradients back).
// Pair t takes ceil(n_t / CP_TILE) consecutive blocks of the
// one-dimensional grid, in order, each block one tile of CP_TILE elements;
// the host sizes the grid to the sum. Addresses and sizes are kernel
// parameters, and each block finds its pair by comparisons alone, as
// sgd_multi in optim.cu does.
#define CP_MAX 16
// cpTile converts the m elements of one tile, four at a time where both
// addresses allow it.
template <class SO, class S1, class F> __device__ __forceinline__ void cpTile(SO* o, const S1* a, i64 m, const F& conv) {
	i64 done = 0;
	if ((u64)a % sizeof(Vec<4, S1>) == 0 && (u64)o % sizeof(Vec<4, SO>) == 0) {
		const i64 nv = m >> 2;
		for (i64 i = threadIdx.x; i < nv; i += blockDim.x) {
			const Vec<4, S1> x = ((const Vec<4, S1>*)a)[i];
			Vec<4, SO> y;
			for (int j = 0; j < 4; j++) y.v[j] = conv(x.v[j]);
			((Vec<4, SO>*)o)[i] = y;
		}
		done = nv << 2;
	}
	for (i64 i = done + threadIdx.x; i < m; i += blockDim.x) o[i] = conv(a[i]);
}
#ifndef CP_TILE
#define CP_TILE 4096
#endif
#define CP_T(t, DD) DT<DD>::S *o##t, const DT<SD>::S *a##t, i64 n##t
#define CP_PICK(t)                                                                                               \
	if (t < nt) {                                                                                            \
		const i64 nb = (n##t + CP_TILE - 1) / CP_TILE;                                                   \
		if (blk < start + nb) {                                                                          \
			const i64 off = (blk - start) * CP_TILE;                                                 \
			cpTile(o##t + off, a##t + off, n##t - off < CP_TILE ? n##t - off : (i64)CP_TILE, conv);  \
			return;                                                                                  \
		}                                                                                                \
		start += nb;                                                                                     \
	}
#define COPY_MULTI(NAME, DD)                                                                                     \
	extern "C" __global__ void cp_##NAME##_multi(int nt, CP_T(0, DD), CP_T(1, DD), CP_T(2, DD), CP_T(3, DD),    \
						     CP_T(4, DD), CP_T(5, DD), CP_T(6, DD), CP_T(7, DD), CP_T(8, DD),   \
						     CP_T(9, DD), CP_T(10, DD), CP_T(11, DD), CP_T(12, DD),             \
						     CP_T(13, DD), CP_T(14, DD), CP_T(15, DD)) {                        \
		const Conv<DD> conv{};                                                                             \
		const i64 blk = blockIdx.x;                                                                      \
		i64 start = 0;                                                                                   \
		CP_PICK(0) CP_PICK(1) CP_PICK(2) CP_PICK(3) CP_PICK(4) CP_PICK(5) CP_PICK(6) CP_PICK(7)          \
		CP_PICK(8) CP_PICK(9) CP_PICK(10) CP_PICK(11) CP_PICK(12) CP_PICK(13) CP_PICK(14) CP_PICK(15)    \
	}

#define COPY_KERNELS(NAME, DD)                                                                                   \
	COPY_MULTI(NAME, DD)                                                                                     \
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
