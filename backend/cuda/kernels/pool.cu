// pool.cu: max and average pooling of channels-last (NHWC) tensors. The
// input is read as N·H·W rows of C channels and the output as N·OH·OW
// rows. Each thread takes V neighbouring channels of one row (V = 1, 2, 4
// or 8, named in the kernel's suffix, with one access of V elements of at
// most 16 bytes) at a time: consecutive threads take consecutive groups of
// channels of a row, then of the next row, so that a warp's accesses are
// coalesced whatever C is, and the grid strides over all rows × C/V items.
// Items and element offsets are counted in 32 bits (the caller keeps both
// tensors below 2³¹ elements): a 64-bit division per item would cost more
// than the item's loads. Windows have no dilation; max pooling windows
// hold at most 255 taps (the backward pass keeps a tap's number in a byte).
//
// Max pooling follows PyTorch's kernels: the taps of a window inside the
// input are visited row by row, and a value is kept when it is above the
// maximum so far or NaN, so a window's maximum is its first largest value,
// or its last NaN, or, when every value is −Inf, its first tap inside the
// input. The backward pass first finds that tap again for every output
// (pool_max_arg), then gives each input element the gradients of the
// outputs that took it (pool_max_bwd): a gather without atomics, so the
// result does not depend on scheduling. Average pooling divides as PyTorch
// does: by the window's taps inside the input padded on each side
// (includePad), or inside the input alone.

#if VD == DT_F32 || VD == DT_F16 || VD == DT_BF16

#if defined(K_ALL) || defined(K_pool)

typedef DT<VD>::S PS;

// PBytes<B>::T is an unsigned type of B bytes, read or written in one
// access.
template <int B> struct PBytes;
template <> struct PBytes<1> { typedef unsigned char T; };
template <> struct PBytes<2> { typedef unsigned short T; };
template <> struct PBytes<4> { typedef unsigned T; };
template <> struct PBytes<8> { typedef uint2 T; };
template <> struct PBytes<16> { typedef uint4 T; };

// PVec holds V elements of E as one access of V·sizeof(E) bytes.
template <class E, int V> union PVec {
	typename PBytes<V * sizeof(E)>::T u;
	E e[V];
};

// pld loads V neighbouring values at p (aligned to V elements).
template <int V> __device__ __forceinline__ void pld(const PS* p, float* v) {
	PVec<PS, V> w;
	w.u = *(const decltype(w.u)*)p;
	for (int i = 0; i < V; i++) v[i] = ldc<VD>(w.e[i]);
}

// pst stores V values at p (aligned to V elements).
template <int V> __device__ __forceinline__ void pst(PS* p, const float* v) {
	PVec<PS, V> w;
	for (int i = 0; i < V; i++) w.e[i] = st<VD>(v[i]);
	*(decltype(w.u)*)p = w.u;
}

// PoolGeo is a pooling's geometry: input N×H×W, output OH×OW, C channels,
// a kh×kw window moved by sh, sw over an input padded by ph, pw.
struct PoolGeo {
	int N, H, W, C, OH, OW, kh, kw, sh, sw, ph, pw;
};

#define POOL_PARAMS int N, int H, int W, int C, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw
#define POOL_GEO PoolGeo g = {N, H, W, C, OH, OW, kh, kw, sh, sw, ph, pw}

// POOL_ITEMS walks the items of M rows, C/V a row, a grid stride at a
// time; the body finds its row and first channel with POOL_ITEM.
#define POOL_ITEMS(M)                                                                                  \
	for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x, G = (unsigned)(g.C / V), items = (unsigned)(M) * G; \
	     k < items; k += gridDim.x * blockDim.x)
#define POOL_ITEM                    \
	const int r = (int)(k / G);      \
	const int c0 = (int)(k - (unsigned)r * G) * V

// maxTap finds, for output row r and channels c0…c0+V−1, the maximum of
// each window and its tap (i·kw + j), as the file's comment says.
template <int V> __device__ __forceinline__ void maxTap(const PS* x, const PoolGeo& g, int r, int c0, float* m, int* tap) {
	const int ow = r % g.OW;
	const int t = r / g.OW;
	const int oh = t % g.OH;
	const int n = t / g.OH;
	const int hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
	const int i0 = max(0, -hs), i1 = min(g.kh, g.H - hs), j0 = max(0, -ws), j1 = min(g.kw, g.W - ws);
	for (int v = 0; v < V; v++) {
		m[v] = -__int_as_float(0x7f800000);
		tap[v] = i0 * g.kw + j0;
	}
	for (int i = i0; i < i1; i++) {
		const PS* row = x + ((n * g.H + hs + i) * g.W + ws + j0) * g.C + c0;
		for (int j = j0; j < j1; j++, row += g.C) {
			float a[V];
			pld<V>(row, a);
			for (int v = 0; v < V; v++)
				if (a[v] > m[v] || a[v] != a[v]) {
					m[v] = a[v];
					tap[v] = i * g.kw + j;
				}
		}
	}
}

// pool_max: y = the maximum of each window of x; pool_max_taps also
// writes the tap each maximum came from to arg, a byte per element of y,
// as pool_max_arg does, for a backward pass that then need not find them
// again (arg is null for pool_max).
template <int V> __device__ __forceinline__ void poolMax(const PS* x, PS* y, unsigned char* arg, const PoolGeo& g) {
	POOL_ITEMS(g.N * g.OH * g.OW) {
		POOL_ITEM;
		float m[V];
		int tap[V];
		maxTap<V>(x, g, r, c0, m, tap);
		pst<V>(y + r * g.C + c0, m);
		if (arg) {
			PVec<unsigned char, V> w;
			for (int v = 0; v < V; v++) w.e[v] = (unsigned char)tap[v];
			*(decltype(w.u)*)(arg + r * g.C + c0) = w.u;
		}
	}
}

// pool_max_arg: arg = the tap each window's maximum came from, a byte per
// output element.
template <int V> __device__ __forceinline__ void poolMaxArg(const PS* x, unsigned char* arg, const PoolGeo& g) {
	POOL_ITEMS(g.N * g.OH * g.OW) {
		POOL_ITEM;
		float m[V];
		int tap[V];
		maxTap<V>(x, g, r, c0, m, tap);
		PVec<unsigned char, V> w;
		for (int v = 0; v < V; v++) w.e[v] = (unsigned char)tap[v];
		*(decltype(w.u)*)(arg + r * g.C + c0) = w.u;
	}
}

// covering returns in [*lo, *hi) the outputs along one axis whose windows
// (size k, stride s, padding p, out outputs) cover input index i.
__device__ __forceinline__ void covering(int i, int k, int s, int p, int out, int* lo, int* hi) {
	const int a = i + p - k + 1; // the lowest window start that covers i
	*lo = a <= 0 ? 0 : (a + s - 1) / s;
	*hi = min(out, (i + p) / s + 1);
}

// pool_max_bwd: dx at each input element = the sum of dy over the outputs
// whose window took it (arg from pool_max_arg or pool_max_taps).
template <int V> __device__ __forceinline__ void poolMaxBwd(const PS* dy, const unsigned char* arg, PS* dx, const PoolGeo& g) {
	POOL_ITEMS(g.N * g.H * g.W) {
		POOL_ITEM;
		const int w = r % g.W;
		const int t = r / g.W;
		const int h = t % g.H;
		const int n = t / g.H;
		int oh0, oh1, ow0, ow1;
		covering(h, g.kh, g.sh, g.ph, g.OH, &oh0, &oh1);
		covering(w, g.kw, g.sw, g.pw, g.OW, &ow0, &ow1);
		float acc[V];
		for (int v = 0; v < V; v++) acc[v] = 0;
		for (int oh = oh0; oh < oh1; oh++)
			for (int ow = ow0; ow < ow1; ow++) {
				const int tap = (h + g.ph - oh * g.sh) * g.kw + (w + g.pw - ow * g.sw);
				const int o = ((n * g.OH + oh) * g.OW + ow) * g.C + c0;
				PVec<unsigned char, V> b;
				b.u = *(const decltype(b.u)*)(arg + o);
				float d[V];
				pld<V>(dy + o, d);
				for (int v = 0; v < V; v++)
					if (b.e[v] == tap) acc[v] += d[v];
			}
		pst<V>(dx + r * g.C + c0, acc);
	}
}

// avgDivisor returns the divisor of the window at (oh, ow), as the file's
// comment says.
__device__ __forceinline__ float avgDivisor(const PoolGeo& g, int oh, int ow, int includePad) {
	int hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
	int he = min(hs + g.kh, g.H + g.ph), we = min(ws + g.kw, g.W + g.pw);
	if (!includePad) {
		hs = max(hs, 0);
		ws = max(ws, 0);
		he = min(he, g.H);
		we = min(we, g.W);
	}
	return (float)((he - hs) * (we - ws));
}

// pool_avg: y = the sum of each window of x inside the input over its
// divisor.
template <int V> __device__ __forceinline__ void poolAvg(const PS* x, PS* y, const PoolGeo& g, int includePad) {
	POOL_ITEMS(g.N * g.OH * g.OW) {
		POOL_ITEM;
		const int ow = r % g.OW;
		const int t = r / g.OW;
		const int oh = t % g.OH;
		const int n = t / g.OH;
		const int hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
		const int i0 = max(0, -hs), i1 = min(g.kh, g.H - hs), j0 = max(0, -ws), j1 = min(g.kw, g.W - ws);
		float s[V];
		for (int v = 0; v < V; v++) s[v] = 0;
		for (int i = i0; i < i1; i++) {
			const PS* row = x + ((n * g.H + hs + i) * g.W + ws + j0) * g.C + c0;
			for (int j = j0; j < j1; j++, row += g.C) {
				float a[V];
				pld<V>(row, a);
				for (int v = 0; v < V; v++) s[v] += a[v];
			}
		}
		const float d = avgDivisor(g, oh, ow, includePad);
		for (int v = 0; v < V; v++) s[v] /= d;
		pst<V>(y + r * g.C + c0, s);
	}
}

// pool_avg_bwd: dx at each input element = the sum, over the windows that
// cover it, of dy over the window's divisor.
template <int V> __device__ __forceinline__ void poolAvgBwd(const PS* dy, PS* dx, const PoolGeo& g, int includePad) {
	POOL_ITEMS(g.N * g.H * g.W) {
		POOL_ITEM;
		const int w = r % g.W;
		const int t = r / g.W;
		const int h = t % g.H;
		const int n = t / g.H;
		int oh0, oh1, ow0, ow1;
		covering(h, g.kh, g.sh, g.ph, g.OH, &oh0, &oh1);
		covering(w, g.kw, g.sw, g.pw, g.OW, &ow0, &ow1);
		float acc[V];
		for (int v = 0; v < V; v++) acc[v] = 0;
		for (int oh = oh0; oh < oh1; oh++)
			for (int ow = ow0; ow < ow1; ow++) {
				float d[V];
				pld<V>(dy + ((n * g.OH + oh) * g.OW + ow) * g.C + c0, d);
				const float q = avgDivisor(g, oh, ow, includePad);
				for (int v = 0; v < V; v++) acc[v] += d[v] / q;
			}
		pst<V>(dx + r * g.C + c0, acc);
	}
}

// The kernels, for V = 1, 2, 4 and 8 channels a thread (suffix "", 2, 4,
// 8); V·sizeof(PS) must be at most 16 bytes.
#define POOL_KERNELS(SUF, V)                                                                                        \
	extern "C" __global__ void pool_max##SUF(const PS* x, PS* y, POOL_PARAMS) {                                    \
		POOL_GEO;                                                                                                  \
		poolMax<V>(x, y, nullptr, g);                                                                              \
	}                                                                                                              \
	extern "C" __global__ void pool_max_taps##SUF(const PS* x, PS* y, unsigned char* arg, POOL_PARAMS) {           \
		POOL_GEO;                                                                                                  \
		poolMax<V>(x, y, arg, g);                                                                                  \
	}                                                                                                              \
	extern "C" __global__ void pool_max_arg##SUF(const PS* x, unsigned char* arg, POOL_PARAMS) {                  \
		POOL_GEO;                                                                                                  \
		poolMaxArg<V>(x, arg, g);                                                                                  \
	}                                                                                                              \
	extern "C" __global__ void pool_max_bwd##SUF(const PS* dy, const unsigned char* arg, PS* dx, POOL_PARAMS) {    \
		POOL_GEO;                                                                                                  \
		poolMaxBwd<V>(dy, arg, dx, g);                                                                             \
	}                                                                                                              \
	extern "C" __global__ void pool_avg##SUF(const PS* x, PS* y, POOL_PARAMS, int includePad) {                    \
		POOL_GEO;                                                                                                  \
		poolAvg<V>(x, y, g, includePad);                                                                           \
	}                                                                                                              \
	extern "C" __global__ void pool_avg_bwd##SUF(const PS* dy, PS* dx, POOL_PARAMS, int includePad) {              \
		POOL_GEO;                                                                                                  \
		poolAvgBwd<V>(dy, dx, g, includePad);                                                                      \
	}
POOL_KERNELS(, 1)
POOL_KERNELS(2, 2)
POOL_KERNELS(4, 4)
#if VD != DT_F32
POOL_KERNELS(8, 8)
#endif

#endif // K_pool
#endif // VD
