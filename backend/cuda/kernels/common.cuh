// common.cuh: types, conversions and indexing shared by every vram kernel.
// The Go side prepends it to each module's source (no #include: NVRTC sees
// one file). Kernels index with 64 bits; the shapes and strides of strided
// operands arrive as scalar parameters, innermost dimension first.

typedef long long i64;
typedef unsigned long long u64;

#define MAXD 8
#define DIMS8(p) i64 p##0, i64 p##1, i64 p##2, i64 p##3, i64 p##4, i64 p##5, i64 p##6, i64 p##7
#define ARR8(p) {p##0, p##1, p##2, p##3, p##4, p##5, p##6, p##7}

// Error codes written to the device's error word (see errors.go).
#define ERR_GATHER_INDEX 1
#define ERR_SCATTER_INDEX 2
#define ERR_INT_DIV_ZERO 3

// The dtypes, numbered as backend.DType.
#define DT_F32 1
#define DT_F64 2
#define DT_F16 3
#define DT_BF16 4
#define DT_I32 5
#define DT_I64 6
#define DT_BOOL 7
#define DT_I8 8

template <int D> struct DT;
template <> struct DT<DT_F32> { typedef float S; typedef float C; typedef float A; enum { isFloat = 1 }; };
template <> struct DT<DT_F64> { typedef double S; typedef double C; typedef double A; enum { isFloat = 1 }; };
template <> struct DT<DT_F16> { typedef unsigned short S; typedef float C; typedef float A; enum { isFloat = 1 }; };
template <> struct DT<DT_BF16> { typedef unsigned short S; typedef float C; typedef float A; enum { isFloat = 1 }; };
template <> struct DT<DT_I32> { typedef int S; typedef int C; typedef i64 A; enum { isFloat = 0 }; };
template <> struct DT<DT_I64> { typedef i64 S; typedef i64 C; typedef i64 A; enum { isFloat = 0 }; };
template <> struct DT<DT_BOOL> { typedef unsigned char S; typedef int C; typedef i64 A; enum { isFloat = 0 }; };
template <> struct DT<DT_I8> { typedef signed char S; typedef int C; typedef i64 A; enum { isFloat = 0 }; };

// ---- 16-bit floats, without cuda_fp16.h (which NVRTC parses slowly).

__device__ __forceinline__ float h2f(unsigned short h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}
__device__ __forceinline__ unsigned short f2h(float f) {
	unsigned short h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
	return h;
}
__device__ __forceinline__ float bf2f(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ unsigned short f2bf(float f) {
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); // quiet NaN
	u += 0x7fffu + ((u >> 16) & 1u);                                                  // round to nearest even
	return (unsigned short)(u >> 16);
}

// round_to_odd rounds x to float with round-to-odd, so that rounding the
// result again to a 16-bit float gives the correctly rounded value of x.
__device__ __forceinline__ float round_to_odd(double x) {
	float f = __double2float_rz(x);
	if ((double)f != x && x == x) f = __uint_as_float(__float_as_uint(f) | 1u);
	return f;
}

// ---- loads: storage to compute type.

template <int D> __device__ __forceinline__ typename DT<D>::C ldc(typename DT<D>::S v) { return v; }
template <> __device__ __forceinline__ float ldc<DT_F16>(unsigned short v) { return h2f(v); }
template <> __device__ __forceinline__ float ldc<DT_BF16>(unsigned short v) { return bf2f(v); }
template <> __device__ __forceinline__ int ldc<DT_BOOL>(unsigned char v) { return v != 0; }

// ---- stores: any compute value to storage, as the CPU backend converts.

template <int D> struct Store;
template <> struct Store<DT_F32> {
	template <class X> static __device__ __forceinline__ float f(X v) { return (float)v; }
};
template <> struct Store<DT_F64> {
	template <class X> static __device__ __forceinline__ double f(X v) { return (double)v; }
};
template <> struct Store<DT_F16> {
	static __device__ __forceinline__ unsigned short f(float v) { return f2h(v); }
	static __device__ __forceinline__ unsigned short f(double v) { return f2h(round_to_odd(v)); }
	static __device__ __forceinline__ unsigned short f(int v) { return f2h(round_to_odd((double)v)); }
	static __device__ __forceinline__ unsigned short f(i64 v) { return f2h(round_to_odd((double)v)); }
};
template <> struct Store<DT_BF16> {
	static __device__ __forceinline__ unsigned short f(float v) { return f2bf(v); }
	static __device__ __forceinline__ unsigned short f(double v) { return f2bf(round_to_odd(v)); }
	static __device__ __forceinline__ unsigned short f(int v) { return f2bf(round_to_odd((double)v)); }
	static __device__ __forceinline__ unsigned short f(i64 v) { return f2bf(round_to_odd((double)v)); }
};
template <> struct Store<DT_I32> {
	static __device__ __forceinline__ int f(float v) { return (int)v; }
	static __device__ __forceinline__ int f(double v) { return (int)v; }
	static __device__ __forceinline__ int f(int v) { return v; }
	static __device__ __forceinline__ int f(i64 v) { return (int)v; }
};
template <> struct Store<DT_I64> {
	template <class X> static __device__ __forceinline__ i64 f(X v) { return (i64)v; }
};
// int8 as the CPU backend converts: floats truncate to 64 bits (NaN gives
// 0), then every integer keeps its low 8 bits.
template <> struct Store<DT_I8> {
	static __device__ __forceinline__ signed char f(float v) { return v == v ? (signed char)(i64)v : 0; }
	static __device__ __forceinline__ signed char f(double v) { return v == v ? (signed char)(i64)v : 0; }
	static __device__ __forceinline__ signed char f(int v) { return (signed char)v; }
	static __device__ __forceinline__ signed char f(i64 v) { return (signed char)v; }
};
template <> struct Store<DT_BOOL> {
	template <class X> static __device__ __forceinline__ unsigned char f(X v) { return v != 0 ? 1 : 0; } // NaN too
};
template <int D, class X> __device__ __forceinline__ typename DT<D>::S st(X v) { return Store<D>::f(v); }

__device__ __forceinline__ float nan_f() { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ double inf_d() { return __longlong_as_double(0x7ff0000000000000LL); }

// ---- indexing.

// Idx describes the iteration space of N operands: nd dimensions, innermost
// first, and each operand's element strides.
template <int N> struct Idx {
	int nd;
	int small; // every linear index fits in 32 bits: divide in 32 bits
	i64 sh[MAXD];
	i64 st[N][MAXD];
};

// offsets computes each operand's element offset of linear index i and
// returns the index along the innermost dimension.
template <int N> __device__ __forceinline__ i64 offsets(const Idx<N>& ix, i64 i, i64 (&off)[N]) {
	i64 c0 = 0;
#pragma unroll
	for (int k = 0; k < N; k++) off[k] = 0;
	if (ix.small) {
		unsigned u = (unsigned)i;
#pragma unroll
		for (int d = 0; d < MAXD; d++) {
			if (d >= ix.nd) break;
			unsigned n = (unsigned)ix.sh[d];
			unsigned q = u / n;
			i64 r = (i64)(u - q * n);
			u = q;
			if (d == 0) c0 = r;
#pragma unroll
			for (int k = 0; k < N; k++) off[k] += r * ix.st[k][d];
		}
	} else {
#pragma unroll
		for (int d = 0; d < MAXD; d++) {
			if (d >= ix.nd) break;
			i64 q = i / ix.sh[d];
			i64 r = i - q * ix.sh[d];
			i = q;
			if (d == 0) c0 = r;
#pragma unroll
			for (int k = 0; k < N; k++) off[k] += r * ix.st[k][d];
		}
	}
	return c0;
}

// UNROLL is the number of consecutive elements each thread of a strided
// elementwise kernel handles per step: the offsets of the next ones follow
// from the first along the innermost dimension, and their loads are all
// issued before the first store.
#define UNROLL 4

template <int N>
__device__ __forceinline__ void strided_offsets(const Idx<N>& ix, i64 base, i64 n, i64 (&off)[UNROLL][N]) {
	i64 c0 = offsets<N>(ix, base, off[0]);
	i64 sh0 = ix.nd > 0 ? ix.sh[0] : 1;
#pragma unroll
	for (int j = 1; j < UNROLL; j++) {
		if (c0 + j < sh0) {
#pragma unroll
			for (int k = 0; k < N; k++) off[j][k] = off[0][k] + j * ix.st[k][0];
		} else if (base + j < n) {
			offsets<N>(ix, base + j, off[j]);
		}
	}
}

#define IDX_PARAMS1 int nd, int small, DIMS8(sh), DIMS8(s0)
#define IDX_PARAMS2 int nd, int small, DIMS8(sh), DIMS8(s0), DIMS8(s1)
#define IDX_PARAMS3 int nd, int small, DIMS8(sh), DIMS8(s0), DIMS8(s1), DIMS8(s2)
#define IDX_PARAMS4 int nd, int small, DIMS8(sh), DIMS8(s0), DIMS8(s1), DIMS8(s2), DIMS8(s3)
#define IDX_BUILD1 Idx<1> ix = {nd, small, ARR8(sh), {ARR8(s0)}}
#define IDX_BUILD2 Idx<2> ix = {nd, small, ARR8(sh), {ARR8(s0), ARR8(s1)}}
#define IDX_BUILD3 Idx<3> ix = {nd, small, ARR8(sh), {ARR8(s0), ARR8(s1), ARR8(s2)}}
#define IDX_BUILD4 Idx<4> ix = {nd, small, ARR8(sh), {ARR8(s0), ARR8(s1), ARR8(s2), ARR8(s3)}}

#define GTID ((i64)blockIdx.x * blockDim.x + threadIdx.x)
#define GNTH ((i64)gridDim.x * blockDim.x)

template <int V, class T> struct alignas(sizeof(T) * V) Vec {
	T v[V];
};

// Grid-stride loops over n elements for 1, 2 and 3 inputs. The contiguous
// forms take vec != 0 when every pointer is aligned to 4 elements, and then
// move 4 elements per access, EW_U accesses per thread at a time: all of a
// step's loads are issued before its first store, so that each thread keeps
// several loads in flight (the stores may alias the loads, which stops the
// compiler from doing this itself).
#define EW_U 4

// ew_u is the number of accesses per step for element types T1..T4: 1 when
// one of them is a byte (bool), where the unrolled form was seen to give
// wrong results in lane 3 of some vectors (NVRTC, CUDA 13, sm_90: bool to
// bfloat16 copies), and EW_U otherwise.
template <class T1, class T2, class T3 = int, class T4 = int> struct EwU {
	enum { u = (sizeof(T1) == 1 || sizeof(T2) == 1 || sizeof(T3) == 1 || sizeof(T4) == 1) ? 1 : EW_U };
};

template <class SO, class S1, class F>
__device__ __forceinline__ void ew1c(SO* o, const S1* a, i64 n, int vec, const F& f) {
	i64 t = GTID, nt = GNTH;
	i64 done = 0;
	if (vec) {
		i64 nv = n >> 2;
		const Vec<4, S1>* av = (const Vec<4, S1>*)a;
		Vec<4, SO>* ov = (Vec<4, SO>*)o;
		const int U = EwU<S1, SO>::u;
		for (i64 base = t; base < nv; base += nt * U) {
			Vec<4, S1> x[U];
#pragma unroll
			for (int u = 0; u < U; u++)
				if (base + u * nt < nv) x[u] = av[base + u * nt];
#pragma unroll
			for (int u = 0; u < U; u++)
				if (base + u * nt < nv) {
					Vec<4, SO> y;
#pragma unroll
					for (int j = 0; j < 4; j++) y.v[j] = f(x[u].v[j]);
					ov[base + u * nt] = y;
				}
		}
		done = nv << 2;
	}
	for (i64 i = done + t; i < n; i += nt) o[i] = f(a[i]);
}

template <class SO, class S1, class F>
__device__ __forceinline__ void ew1s(SO* o, const S1* a, i64 n, const Idx<2>& ix, const F& f) {
	for (i64 base = GTID * UNROLL; base < n; base += GNTH * UNROLL) {
		i64 off[UNROLL][2];
		strided_offsets<2>(ix, base, n, off);
		S1 x[UNROLL];
#pragma unroll
		for (int j = 0; j < UNROLL; j++)
			if (base + j < n) x[j] = a[off[j][1]];
#pragma unroll
		for (int j = 0; j < UNROLL; j++)
			if (base + j < n) o[off[j][0]] = f(x[j]);
	}
}

template <class SO, class S1, class S2, class F>
__device__ __forceinline__ void ew2c(SO* o, const S1* a, const S2* b, i64 n, int vec, const F& f) {
	i64 t = GTID, nt = GNTH;
	i64 done = 0;
	if (vec) {
		i64 nv = n >> 2;
		const Vec<4, S1>* av = (const Vec<4, S1>*)a;
		const Vec<4, S2>* bv = (const Vec<4, S2>*)b;
		Vec<4, SO>* ov = (Vec<4, SO>*)o;
		const int U = EwU<S1, S2, SO>::u;
		for (i64 base = t; base < nv; base += nt * U) {
			Vec<4, S1> x[U];
			Vec<4, S2> y[U];
#pragma unroll
			for (int u = 0; u < U; u++)
				if (base + u * nt < nv) {
					x[u] = av[base + u * nt];
					y[u] = bv[base + u * nt];
				}
#pragma unroll
			for (int u = 0; u < U; u++)
				if (base + u * nt < nv) {
					Vec<4, SO> z;
#pragma unroll
					for (int j = 0; j < 4; j++) z.v[j] = f(x[u].v[j], y[u].v[j]);
					ov[base + u * nt] = z;
				}
		}
		done = nv << 2;
	}
	for (i64 i = done + t; i < n; i += nt) o[i] = f(a[i], b[i]);
}

template <class SO, class S1, class S2, class F>
__device__ __forceinline__ void ew2s(SO* o, const S1* a, const S2* b, i64 n, const Idx<3>& ix, const F& f) {
	for (i64 base = GTID * UNROLL; base < n; base += GNTH * UNROLL) {
		i64 off[UNROLL][3];
		strided_offsets<3>(ix, base, n, off);
		S1 x[UNROLL];
		S2 y[UNROLL];
#pragma unroll
		for (int j = 0; j < UNROLL; j++)
			if (base + j < n) {
				x[j] = a[off[j][1]];
				y[j] = b[off[j][2]];
			}
#pragma unroll
		for (int j = 0; j < UNROLL; j++)
			if (base + j < n) o[off[j][0]] = f(x[j], y[j]);
	}
}

// ew2r is ew2c for a row broadcast: one operand is contiguous with n
// elements and the other a vector of inner elements repeated along it (a
// bias added to every row), read at i % inner; bca says which one is the
// vector (1: a, 0: b). With vec, inner is a multiple of 4 and every pointer
// is aligned to 4 elements. The column index steps by the grid's stride
// modulo the row length instead of dividing per element.
template <class SO, class S1, class S2, class F>
__device__ __forceinline__ void ew2r(SO* o, const S1* a, const S2* b, i64 n, i64 inner, int vec, int bca, const F& f) {
	i64 t = GTID, nt = GNTH;
	if (vec) {
		i64 nv = n >> 2, iv = inner >> 2;
		i64 c = t % iv, step = nt % iv;
		const Vec<4, S1>* av = (const Vec<4, S1>*)a;
		const Vec<4, S2>* bv = (const Vec<4, S2>*)b;
		Vec<4, SO>* ov = (Vec<4, SO>*)o;
		const int U = EwU<S1, S2, SO>::u;
		for (i64 base = t; base < nv; base += nt * U) {
			Vec<4, S1> x[U];
			Vec<4, S2> y[U];
#pragma unroll
			for (int u = 0; u < U; u++) {
				i64 i = base + u * nt;
				if (i < nv) {
					x[u] = av[bca ? c : i];
					y[u] = bv[bca ? i : c];
				}
				c += step;
				if (c >= iv) c -= iv;
			}
#pragma unroll
			for (int u = 0; u < U; u++)
				if (base + u * nt < nv) {
					Vec<4, SO> z;
#pragma unroll
					for (int j = 0; j < 4; j++) z.v[j] = f(x[u].v[j], y[u].v[j]);
					ov[base + u * nt] = z;
				}
		}
		return;
	}
	i64 c = t % inner, step = nt % inner;
	for (i64 i = t; i < n; i += nt) {
		o[i] = f(a[bca ? c : i], b[bca ? i : c]);
		c += step;
		if (c >= inner) c -= inner;
	}
}

// ew1t is ew1c for a 2-D [R, C] space with dst row-major and the input
// column-major (a transposed view): Contiguous of a transpose. Tiles as in
// ew2t.
template <class SO, class S1, class F>
__device__ __forceinline__ void ew1t(SO* o, const S1* a, i64 R, i64 C, const F& f) {
	__shared__ S1 tile[32][33];
	int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	i64 tc = (C + 31) >> 5, nt = ((R + 31) >> 5) * tc;
	for (i64 ti = blockIdx.x; ti < nt; ti += gridDim.x) {
		i64 r0 = (ti / tc) << 5, c0 = (ti % tc) << 5;
#pragma unroll
		for (int k = ty; k < 32; k += 8) {
			i64 c = c0 + k, r = r0 + tx;
			if (c < C && r < R) tile[k][tx] = a[c * R + r];
		}
		__syncthreads();
#pragma unroll
		for (int k = ty; k < 32; k += 8) {
			i64 r = r0 + k, c = c0 + tx;
			if (r < R && c < C) o[r * C + c] = f(tile[tx][k]);
		}
		__syncthreads();
	}
}

// ew2t is ew2c for a 2-D [R, C] space where dst and one input are
// row-major and the other input is column-major (a transposed view, element
// (r, c) at r + c·R); bta says which input is transposed (1: a). Each block
// of 256 threads stages 32×32 tiles of the transposed input through shared
// memory, so that both inputs are read along their contiguous dimension.
template <class SO, class S, class F>
__device__ __forceinline__ void ew2t(SO* o, const S* a, const S* b, i64 R, i64 C, int bta, const F& f) {
	__shared__ S tile[32][33];
	const S* tp = bta ? a : b;
	const S* np = bta ? b : a;
	int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	i64 tc = (C + 31) >> 5, nt = ((R + 31) >> 5) * tc;
	for (i64 ti = blockIdx.x; ti < nt; ti += gridDim.x) {
		i64 r0 = (ti / tc) << 5, c0 = (ti % tc) << 5;
#pragma unroll
		for (int k = ty; k < 32; k += 8) {
			i64 c = c0 + k, r = r0 + tx;
			if (c < C && r < R) tile[k][tx] = tp[c * R + r];
		}
		__syncthreads();
		S nv[4];
#pragma unroll
		for (int k = ty, j = 0; k < 32; k += 8, j++) {
			i64 r = r0 + k, c = c0 + tx;
			if (r < R && c < C) nv[j] = np[r * C + c];
		}
#pragma unroll
		for (int k = ty, j = 0; k < 32; k += 8, j++) {
			i64 r = r0 + k, c = c0 + tx;
			if (r < R && c < C) {
				S tv = tile[tx][k];
				o[r * C + c] = bta ? f(tv, nv[j]) : f(nv[j], tv);
			}
		}
		__syncthreads();
	}
}

template <class SO, class S1, class S2, class S3, class F>
__device__ __forceinline__ void ew3c(SO* o, const S1* a, const S2* b, const S3* c, i64 n, int vec, const F& f) {
	i64 t = GTID, nt = GNTH;
	i64 done = 0;
	if (vec) {
		i64 nv = n >> 2;
		const Vec<4, S1>* av = (const Vec<4, S1>*)a;
		const Vec<4, S2>* bv = (const Vec<4, S2>*)b;
		const Vec<4, S3>* cv = (const Vec<4, S3>*)c;
		Vec<4, SO>* ov = (Vec<4, SO>*)o;
		const int U = EwU<S1, S2, S3, SO>::u;
		for (i64 base = t; base < nv; base += nt * U) {
			Vec<4, S1> x[U];
			Vec<4, S2> y[U];
			Vec<4, S3> z[U];
#pragma unroll
			for (int u = 0; u < U; u++)
				if (base + u * nt < nv) {
					x[u] = av[base + u * nt];
					y[u] = bv[base + u * nt];
					z[u] = cv[base + u * nt];
				}
#pragma unroll
			for (int u = 0; u < U; u++)
				if (base + u * nt < nv) {
					Vec<4, SO> w;
#pragma unroll
					for (int j = 0; j < 4; j++) w.v[j] = f(x[u].v[j], y[u].v[j], z[u].v[j]);
					ov[base + u * nt] = w;
				}
		}
		done = nv << 2;
	}
	for (i64 i = done + t; i < n; i += nt) o[i] = f(a[i], b[i], c[i]);
}

template <class SO, class S1, class S2, class S3, class F>
__device__ __forceinline__ void ew3s(SO* o, const S1* a, const S2* b, const S3* c, i64 n, const Idx<4>& ix, const F& f) {
	for (i64 base = GTID * UNROLL; base < n; base += GNTH * UNROLL) {
		i64 off[UNROLL][4];
		strided_offsets<4>(ix, base, n, off);
		S1 x[UNROLL];
		S2 y[UNROLL];
		S3 z[UNROLL];
#pragma unroll
		for (int j = 0; j < UNROLL; j++)
			if (base + j < n) {
				x[j] = a[off[j][1]];
				y[j] = b[off[j][2]];
				z[j] = c[off[j][3]];
			}
#pragma unroll
		for (int j = 0; j < UNROLL; j++)
			if (base + j < n) o[off[j][0]] = f(x[j], y[j], z[j]);
	}
}

// set_error records the first error of a kernel in the device's error
// words: code, value, bound.
__device__ __forceinline__ void set_error(i64* err, i64 code, i64 value, i64 bound) {
	if (atomicCAS((u64*)err, 0ull, (u64)code) == 0ull) {
		err[1] = value;
		err[2] = bound;
	}
}
