// bytes.cu: kernels that only move elements, by element width: fill,
// strided copy without conversion, where, gather, and the index check of
// scatter-add.

template <class T> __device__ __forceinline__ void fillc(T* o, i64 n, T v, int vec) {
	i64 t = GTID, nt = GNTH, done = 0;
	if (vec) {
		Vec<4, T> w;
#pragma unroll
		for (int j = 0; j < 4; j++) w.v[j] = v;
		i64 nv = n >> 2;
		for (i64 i = t; i < nv; i += nt) ((Vec<4, T>*)o)[i] = w;
		done = nv << 2;
	}
	for (i64 i = done + t; i < n; i += nt) o[i] = v;
}
template <class W> struct Ident {
	__device__ __forceinline__ W operator()(W x) const { return x; }
};
template <class W> struct Select {
	__device__ __forceinline__ W operator()(unsigned char c, W a, W b) const { return c ? a : b; }
};

#define FILL_K(W, T)                                                                                                \
	extern "C" __global__ void fill_w##W##_c(T* o, u64 bits, i64 n, int vec) { fillc<T>(o, n, (T)bits, vec); } \
	extern "C" __global__ void fill_w##W##_s(T* o, u64 bits, i64 n, IDX_PARAMS1) {                              \
		IDX_BUILD1;                                                                                         \
		for (i64 i = GTID; i < n; i += GNTH) {                                                              \
			i64 off[1];                                                                                 \
			offsets<1>(ix, i, off);                                                                     \
			o[off[0]] = (T)bits;                                                                        \
		}                                                                                                   \
	}
#define MOVE_K(W, T)                                                                                                \
	extern "C" __global__ void move_w##W##_s(T* o, const T* a, i64 n, IDX_PARAMS2) {                            \
		IDX_BUILD2;                                                                                         \
		ew1s(o, a, n, ix, Ident<T>());                                                                      \
	}                                                                                                           \
	extern "C" __global__ void move_w##W##_t(T* o, const T* a, i64 rows, i64 cols) {                            \
		ew1t(o, a, rows, cols, Ident<T>());                                                                 \
	}
#define WHERE_K(W, T)                                                                                               \
	extern "C" __global__ void where_w##W##_c(T* o, const unsigned char* c, const T* a, const T* b, i64 n,      \
						  int vec) {                                                        \
		ew3c(o, c, a, b, n, vec, Select<T>());                                                              \
	}                                                                                                           \
	extern "C" __global__ void where_w##W##_s(T* o, const unsigned char* c, const T* a, const T* b, i64 n,      \
						  IDX_PARAMS4) {                                                    \
		IDX_BUILD4;                                                                                         \
		ew3s(o, c, a, b, n, ix, Select<T>());                                                               \
	}
#define GATHER_K(W, T)                                                                                              \
	extern "C" __global__ void gather_w##W(T* o, const T* src, const i64* index, i64* err, i64 bound, i64 ast,  \
					       i64 n, IDX_PARAMS3) {                                               \
		IDX_BUILD3;                                                                                         \
		for (i64 i = GTID; i < n; i += GNTH) {                                                              \
			i64 off[3];                                                                                 \
			offsets<3>(ix, i, off);                                                                     \
			i64 k = index[off[1]];                                                                      \
			if (k < 0 || k >= bound) {                                                                  \
				set_error(err, ERR_GATHER_INDEX, k, bound);                                         \
				continue;                                                                           \
			}                                                                                           \
			o[off[0]] = src[off[2] + k * ast];                                                          \
		}                                                                                                   \
	}
#define ALL_WIDTHS(M) M(1, unsigned char) M(2, unsigned short) M(4, unsigned int) M(8, u64)

#if defined(K_ALL) || defined(K_fill)
ALL_WIDTHS(FILL_K)
#endif
#if defined(K_ALL) || defined(K_move)
ALL_WIDTHS(MOVE_K)
#endif
#if defined(K_ALL) || defined(K_where)
ALL_WIDTHS(WHERE_K)
#endif
#if defined(K_ALL) || defined(K_gather)
ALL_WIDTHS(GATHER_K)
#endif

#if defined(K_ALL) || defined(K_check)
// check_index sets the error words when an index is outside [0, bound).
extern "C" __global__ void check_index(const i64* index, i64* err, i64 bound, i64 n, IDX_PARAMS1) {
	IDX_BUILD1;
	for (i64 i = GTID; i < n; i += GNTH) {
		i64 off[1];
		offsets<1>(ix, i, off);
		i64 k = index[off[0]];
		if (k < 0 || k >= bound) set_error(err, ERR_SCATTER_INDEX, k, bound);
	}
}
#endif
