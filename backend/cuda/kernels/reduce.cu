// reduce.cu: reductions of the module's dtype VD (a -D option). The
// reduced elements of each output are split into chunks that depend only
// on the shapes; a group of G threads (1, a warp or a block) folds one
// chunk of one output, in a fixed pattern, and a tree of fixed shape joins
// the threads' partial results. With more than one chunk, red_*_fin joins
// the chunks' results in chunk order. The result is therefore the same on
// every run. Float types accumulate in float (double for float64),
// integers in 64 bits; the result is rounded to the destination's dtype
// once, at the end. For the 16-bit floats, red_sumw_* and red_prodw_*
// write the float accumulator itself (a float32 destination).

typedef DT<VD>::S S;
typedef DT<VD>::C CT;
typedef DT<VD>::A AT;

template <class T> struct Acc {
	T v;
	i64 idx;
};

template <class T> __device__ __forceinline__ T lowest();
template <> __device__ __forceinline__ float lowest<float>() { return -__int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double lowest<double>() { return -inf_d(); }
template <> __device__ __forceinline__ int lowest<int>() { return (int)0x80000000; }
template <> __device__ __forceinline__ i64 lowest<i64>() { return (i64)0x8000000000000000ULL; }
template <class T> __device__ __forceinline__ T highest();
template <> __device__ __forceinline__ float highest<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double highest<double>() { return inf_d(); }
template <> __device__ __forceinline__ int highest<int>() { return 0x7fffffff; }
template <> __device__ __forceinline__ i64 highest<i64>() { return 0x7fffffffffffffffLL; }

__device__ __forceinline__ float addw(float a, float b) { return a + b; }
__device__ __forceinline__ double addw(double a, double b) { return a + b; }
__device__ __forceinline__ i64 addw(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ float mulw(float a, float b) { return a * b; }
__device__ __forceinline__ double mulw(double a, double b) { return a * b; }
__device__ __forceinline__ i64 mulw(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }

struct RSum {
	typedef AT T;
	static __device__ __forceinline__ Acc<T> init() { return Acc<T>{(T)0, 0}; }
	static __device__ __forceinline__ Acc<T> fold(Acc<T> a, CT x, i64) { return Acc<T>{addw(a.v, (T)x), 0}; }
	static __device__ __forceinline__ Acc<T> join(Acc<T> a, Acc<T> b) { return Acc<T>{addw(a.v, b.v), 0}; }
	static __device__ __forceinline__ S out(Acc<T> a) { return st<VD>(a.v); }
};
struct RProd {
	typedef AT T;
	static __device__ __forceinline__ Acc<T> init() { return Acc<T>{(T)1, 0}; }
	static __device__ __forceinline__ Acc<T> fold(Acc<T> a, CT x, i64) { return Acc<T>{mulw(a.v, (T)x), 0}; }
	static __device__ __forceinline__ Acc<T> join(Acc<T> a, Acc<T> b) { return Acc<T>{mulw(a.v, b.v), 0}; }
	static __device__ __forceinline__ S out(Acc<T> a) { return st<VD>(a.v); }
};
struct RMax {
	typedef CT T;
	static __device__ __forceinline__ Acc<T> init() { return Acc<T>{lowest<T>(), 0}; }
	static __device__ __forceinline__ Acc<T> fold(Acc<T> a, CT x, i64) { return (x > a.v || x != x) ? Acc<T>{x, 0} : a; }
	static __device__ __forceinline__ Acc<T> join(Acc<T> a, Acc<T> b) { return fold(a, b.v, 0); }
	static __device__ __forceinline__ S out(Acc<T> a) { return st<VD>(a.v); }
};
struct RMin {
	typedef CT T;
	static __device__ __forceinline__ Acc<T> init() { return Acc<T>{highest<T>(), 0}; }
	static __device__ __forceinline__ Acc<T> fold(Acc<T> a, CT x, i64) { return (x < a.v || x != x) ? Acc<T>{x, 0} : a; }
	static __device__ __forceinline__ Acc<T> join(Acc<T> a, Acc<T> b) { return fold(a, b.v, 0); }
	static __device__ __forceinline__ S out(Acc<T> a) { return st<VD>(a.v); }
};
// The arg reductions join symmetrically: NaN beats everything, then the
// larger (smaller) value, then the lower index, so the first of the best
// elements wins whatever the split (the CPU backend's rule).
template <int MAX> struct RArg {
	typedef CT T;
	static __device__ __forceinline__ Acc<T> init() { return Acc<T>{(T)0, -1}; }
	static __device__ __forceinline__ Acc<T> join(Acc<T> a, Acc<T> b) {
		if (a.idx < 0) return b;
		if (b.idx < 0) return a;
		bool an = a.v != a.v, bn = b.v != b.v;
		if (an || bn) {
			if (an && bn) return a.idx < b.idx ? a : b;
			return an ? a : b;
		}
		if (MAX ? a.v > b.v : a.v < b.v) return a;
		if (MAX ? b.v > a.v : b.v < a.v) return b;
		return a.idx < b.idx ? a : b;
	}
	static __device__ __forceinline__ Acc<T> fold(Acc<T> a, CT x, i64 r) { return join(a, Acc<T>{x, r}); }
	static __device__ __forceinline__ i64 out(Acc<T> a) { return a.idx; }
};

// RWide is a sum or product that writes its accumulator (float for the
// 16-bit floats) rather than rounding it to the source dtype: Reduce into
// a float32 destination, for means and norms that divide the sum first.
template <class OP> struct RWide {
	typedef typename OP::T T;
	static __device__ __forceinline__ Acc<T> init() { return OP::init(); }
	static __device__ __forceinline__ Acc<T> fold(Acc<T> a, CT x, i64 r) { return OP::fold(a, x, r); }
	static __device__ __forceinline__ Acc<T> join(Acc<T> a, Acc<T> b) { return OP::join(a, b); }
	static __device__ __forceinline__ T out(Acc<T> a) { return a.v; }
};
typedef RWide<RSum> RSumW;
typedef RWide<RProd> RProdW;

template <class T> __device__ __forceinline__ Acc<T> shfl_down(Acc<T> a, int s) {
	a.v = __shfl_down_sync(0xffffffffu, a.v, s);
	a.idx = __shfl_down_sync(0xffffffffu, a.idx, s);
	return a;
}

template <class OP> __device__ __forceinline__ Acc<typename OP::T> warp_join(Acc<typename OP::T> a) {
#pragma unroll
	for (int s = 16; s > 0; s >>= 1) a = OP::join(a, shfl_down(a, s));
	return a;
}

template <class OP, int G, class SO>
__device__ __forceinline__ void reduce_body(const S* src, SO* dst, Acc<typename OP::T>* part, i64 nOut, i64 nRed,
					    i64 nChunks, i64 chunk, const Idx<2>& oix, const Idx<1>& rix) {
	typedef Acc<typename OP::T> A;
	__shared__ A shared[32];
	int lane = G == 1 ? 0 : (int)(threadIdx.x % G);
	i64 group = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
	i64 groups = (i64)gridDim.x * blockDim.x / G;
	i64 tasks = nOut * nChunks;
	for (i64 task = group; task < tasks; task += groups) {
		i64 o = task % nOut, c = task / nOut;
		i64 off[2];
		offsets<2>(oix, o, off);
		i64 lo = c * chunk, hi = min(nRed, lo + chunk);
		A acc = OP::init();
		if (rix.nd <= 1) {
			i64 rs = rix.nd == 1 ? rix.st[0][0] : 0;
			const S* p = src + off[0];
			for (i64 r = lo + lane; r < hi; r += G) acc = OP::fold(acc, ldc<VD>(p[r * rs]), r);
		} else {
			for (i64 r = lo + lane; r < hi; r += G) {
				i64 ro[1];
				offsets<1>(rix, r, ro);
				acc = OP::fold(acc, ldc<VD>(src[off[0] + ro[0]]), r);
			}
		}
		if (G >= 32) acc = warp_join<OP>(acc);
		if (G > 32) {
			int w = threadIdx.x / 32;
			if ((threadIdx.x & 31) == 0) shared[w] = acc;
			__syncthreads();
			if (w == 0) {
				acc = (int)threadIdx.x < G / 32 ? shared[threadIdx.x] : OP::init();
				acc = warp_join<OP>(acc);
			}
			__syncthreads();
		}
		if (lane == 0) {
			if (nChunks == 1)
				dst[off[1]] = OP::out(acc);
			else
				part[task] = acc;
		}
	}
}

template <class OP, class SO>
__device__ __forceinline__ void reduce_fin(const Acc<typename OP::T>* part, SO* dst, i64 nOut, i64 nChunks,
					   const Idx<1>& oix) {
	for (i64 o = GTID; o < nOut; o += GNTH) {
		Acc<typename OP::T> acc = part[o];
		for (i64 c = 1; c < nChunks; c++) acc = OP::join(acc, part[c * nOut + o]);
		i64 off[1];
		offsets<1>(oix, o, off);
		dst[off[0]] = OP::out(acc);
	}
}

#define RED_PARAMS                                                                                           \
	i64 nOut, i64 nRed, i64 nChunks, i64 chunk, int ond, int osmall, DIMS8(osh), DIMS8(oss), DIMS8(ods), \
	    int rnd, int rsmall, DIMS8(rsh), DIMS8(rst)
#define RED_BUILD                                                                           \
	Idx<2> oix = {ond, osmall, ARR8(osh), {ARR8(oss), ARR8(ods)}};                      \
	Idx<1> rix = {rnd, rsmall, ARR8(rsh), {ARR8(rst)}}

#define RED(NAME, OP, SO)                                                                                         \
	extern "C" __global__ void red_##NAME##_g1(const S* src, SO* dst, Acc<OP::T>* part, RED_PARAMS) {        \
		RED_BUILD;                                                                                        \
		reduce_body<OP, 1>(src, dst, part, nOut, nRed, nChunks, chunk, oix, rix);                         \
	}                                                                                                         \
	extern "C" __global__ void red_##NAME##_g32(const S* src, SO* dst, Acc<OP::T>* part, RED_PARAMS) {       \
		RED_BUILD;                                                                                        \
		reduce_body<OP, 32>(src, dst, part, nOut, nRed, nChunks, chunk, oix, rix);                        \
	}                                                                                                         \
	extern "C" __global__ void red_##NAME##_g256(const S* src, SO* dst, Acc<OP::T>* part, RED_PARAMS) {      \
		RED_BUILD;                                                                                        \
		reduce_body<OP, 256>(src, dst, part, nOut, nRed, nChunks, chunk, oix, rix);                       \
	}                                                                                                         \
	extern "C" __global__ void red_##NAME##_fin(const Acc<OP::T>* part, SO* dst, i64 nOut, i64 nChunks,      \
						    IDX_PARAMS1) {                                                \
		IDX_BUILD1;                                                                                       \
		reduce_fin<OP>(part, dst, nOut, nChunks, ix);                                                     \
	}

#if defined(K_ALL) || defined(K_sum)
RED(sum, RSum, S)
#endif
#if defined(K_ALL) || defined(K_prod)
RED(prod, RProd, S)
#endif
#if defined(K_ALL) || defined(K_max)
RED(max, RMax, S)
#endif
#if defined(K_ALL) || defined(K_min)
RED(min, RMin, S)
#endif
#if VD == DT_F16 || VD == DT_BF16
#if defined(K_ALL) || defined(K_sum)
RED(sumw, RSumW, AT)
#endif
#if defined(K_ALL) || defined(K_prod)
RED(prodw, RProdW, AT)
#endif
#endif
#if defined(K_ALL) || defined(K_argmax)
RED(argmax, RArg<1>, i64)
#endif
#if defined(K_ALL) || defined(K_argmin)
RED(argmin, RArg<0>, i64)
#endif
