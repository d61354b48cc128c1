// pool.cu: max and average pooling of channels-last (NHWC) tensors. The
// input is read as N·H·W rows of C channels and the output as N·OH·OW
// rows. Blocks are PL_TX threads wide and PL_TY rows tall; each thread
// takes V neighbouring channels (V = 2 for the kernels named …2, with one
// 4- or 8-byte access; V = 1 otherwise), so that a warp reads PL_TX·V
// neighbouring channels of one row, and walks the rows with a stride of
// gridDim.y·PL_TY. Windows have no dilation; max pooling windows hold at
// most 255 taps (the backward pass keeps a tap's number in a byte).
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

#define PL_TX 32
#define PL_TY 8

#if defined(K_ALL) || defined(K_pool)

typedef DT<VD>::S PS;

// pld loads V neighbouring values at p (aligned to V elements).
template <int V> __device__ __forceinline__ void pld(const PS* p, float* v);
template <> __device__ __forceinline__ void pld<1>(const PS* p, float* v) { v[0] = ldc<VD>(p[0]); }
template <> __device__ __forceinline__ void pld<2>(const PS* p, float* v) {
#if VD == DT_F32
	float2 f = *(const float2*)p;
	v[0] = f.x;
	v[1] = f.y;
#else
	unsigned u = *(const unsigned*)p;
	v[0] = ldc<VD>((unsigned short)(u & 0xffffu));
	v[1] = ldc<VD>((unsigned short)(u >> 16));
#endif
}

// pst stores V values at p (aligned to V elements).
template <int V> __device__ __forceinline__ void pst(PS* p, const float* v);
template <> __device__ __forceinline__ void pst<1>(PS* p, const float* v) { p[0] = st<VD>(v[0]); }
template <> __device__ __forceinline__ void pst<2>(PS* p, const float* v) {
#if VD == DT_F32
	*(float2*)p = make_float2(v[0], v[1]);
#else
	*(unsigned*)p = (unsigned)st<VD>(v[0]) | ((unsigned)st<VD>(v[1]) << 16);
#endif
}

// PoolGeo is a pooling's geometry: input N×H×W, output OH×OW, C channels,
// a kh×kw window moved by sh, sw over an input padded by ph, pw.
struct PoolGeo {
	int N, H, W, C, OH, OW, kh, kw, sh, sw, ph, pw;
};

#define POOL_PARAMS int N, int H, int W, int C, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw
#define POOL_GEO PoolGeo g = {N, H, W, C, OH, OW, kh, kw, sh, sw, ph, pw}

// maxTap finds, for output row r and channels c0…c0+V−1, the maximum of
// each window and its tap (i·kw + j), as the file's comment says.
template <int V> __device__ __forceinline__ void maxTap(const PS* x, const PoolGeo& g, i64 r, int c0, float* m, int* tap) {
	const int ow = (int)(r % g.OW);
	const i64 t = r / g.OW;
	const int oh = (int)(t % g.OH);
	const i64 n = t / g.OH;
	const int hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
	const int i0 = max(0, -hs), i1 = min(g.kh, g.H - hs), j0 = max(0, -ws), j1 = min(g.kw, g.W - ws);
	for (int v = 0; v < V; v++) {
		m[v] = -__int_as_float(0x7f800000);
		tap[v] = i0 * g.kw + j0;
	}
	for (int i = i0; i < i1; i++) {
		const PS* row = x + ((n * g.H + hs + i) * g.W + ws) * g.C + c0;
		for (int j = j0; j < j1; j++) {
			float a[V];
			pld<V>(row + (i64)j * g.C, a);
			for (int v = 0; v < V; v++)
				if (a[v] > m[v] || a[v] != a[v]) {
					m[v] = a[v];
					tap[v] = i * g.kw + j;
				}
		}
	}
}

#define POOL_ROWS(M)                                                                \
	const int c0 = (blockIdx.x * PL_TX + threadIdx.x) * V;                          \
	if (c0 >= g.C) return;                                                          \
	for (i64 r = (i64)blockIdx.y * PL_TY + threadIdx.y; r < (M); r += (i64)gridDim.y * PL_TY)

// pool_max: y = the maximum of each window of x.
template <int V> __device__ __forceinline__ void poolMax(const PS* x, PS* y, const PoolGeo& g) {
	POOL_ROWS((i64)g.N * g.OH * g.OW) {
		float m[V];
		int tap[V];
		maxTap<V>(x, g, r, c0, m, tap);
		pst<V>(y + r * g.C + c0, m);
	}
}
extern "C" __global__ void pool_max(const PS* x, PS* y, POOL_PARAMS) { POOL_GEO; poolMax<1>(x, y, g); }
extern "C" __global__ void pool_max2(const PS* x, PS* y, POOL_PARAMS) { POOL_GEO; poolMax<2>(x, y, g); }

// pool_max_arg: arg = the tap each window's maximum came from, a byte per
// output element.
template <int V> __device__ __forceinline__ void poolMaxArg(const PS* x, unsigned char* arg, const PoolGeo& g) {
	POOL_ROWS((i64)g.N * g.OH * g.OW) {
		float m[V];
		int tap[V];
		maxTap<V>(x, g, r, c0, m, tap);
		for (int v = 0; v < V; v++) arg[r * g.C + c0 + v] = (unsigned char)tap[v];
	}
}
extern "C" __global__ void pool_max_arg(const PS* x, unsigned char* arg, POOL_PARAMS) { POOL_GEO; poolMaxArg<1>(x, arg, g); }
extern "C" __global__ void pool_max_arg2(const PS* x, unsigned char* arg, POOL_PARAMS) { POOL_GEO; poolMaxArg<2>(x, arg, g); }

// covering returns in [*lo, *hi) the outputs along one axis whose windows
// (size k, stride s, padding p, out outputs) cover input index i.
__device__ __forceinline__ void covering(int i, int k, int s, int p, int out, int* lo, int* hi) {
	const int a = i + p - k + 1; // the lowest window start that covers i
	*lo = a <= 0 ? 0 : (a + s - 1) / s;
	*hi = min(out, (i + p) / s + 1);
}

// pool_max_bwd: dx at each input element = the sum of dy over the outputs
// whose window took it (arg from pool_max_arg).
template <int V> __device__ __forceinline__ void poolMaxBwd(const PS* dy, const unsigned char* arg, PS* dx, const PoolGeo& g) {
	POOL_ROWS((i64)g.N * g.H * g.W) {
		const int w = (int)(r % g.W);
		const i64 t = r / g.W;
		const int h = (int)(t % g.H);
		const i64 n = t / g.H;
		int oh0, oh1, ow0, ow1;
		covering(h, g.kh, g.sh, g.ph, g.OH, &oh0, &oh1);
		covering(w, g.kw, g.sw, g.pw, g.OW, &ow0, &ow1);
		float acc[V];
		for (int v = 0; v < V; v++) acc[v] = 0;
		for (int oh = oh0; oh < oh1; oh++)
			for (int ow = ow0; ow < ow1; ow++) {
				const int tap = (h + g.ph - oh * g.sh) * g.kw + (w + g.pw - ow * g.sw);
				const i64 o = ((n * g.OH + oh) * g.OW + ow) * g.C + c0;
				float d[V];
				pld<V>(dy + o, d);
				for (int v = 0; v < V; v++)
					if (arg[o + v] == tap) acc[v] += d[v];
			}
		pst<V>(dx + r * g.C + c0, acc);
	}
}
extern "C" __global__ void pool_max_bwd(const PS* dy, const unsigned char* arg, PS* dx, POOL_PARAMS) {
	POOL_GEO;
	poolMaxBwd<1>(dy, arg, dx, g);
}
extern "C" __global__ void pool_max_bwd2(const PS* dy, const unsigned char* arg, PS* dx, POOL_PARAMS) {
	POOL_GEO;
	poolMaxBwd<2>(dy, arg, dx, g);
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
	POOL_ROWS((i64)g.N * g.OH * g.OW) {
		const int ow = (int)(r % g.OW);
		const i64 t = r / g.OW;
		const int oh = (int)(t % g.OH);
		const i64 n = t / g.OH;
		const int hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
		const int i0 = max(0, -hs), i1 = min(g.kh, g.H - hs), j0 = max(0, -ws), j1 = min(g.kw, g.W - ws);
		float s[V];
		for (int v = 0; v < V; v++) s[v] = 0;
		for (int i = i0; i < i1; i++) {
			const PS* row = x + ((n * g.H + hs + i) * g.W + ws) * g.C + c0;
			for (int j = j0; j < j1; j++) {
				float a[V];
				pld<V>(row + (i64)j * g.C, a);
				for (int v = 0; v < V; v++) s[v] += a[v];
			}
		}
		const float d = avgDivisor(g, oh, ow, includePad);
		for (int v = 0; v < V; v++) s[v] /= d;
		pst<V>(y + r * g.C + c0, s);
	}
}
extern "C" __global__ void pool_avg(const PS* x, PS* y, POOL_PARAMS, int includePad) { POOL_GEO; poolAvg<1>(x, y, g, includePad); }
extern "C" __global__ void pool_avg2(const PS* x, PS* y, POOL_PARAMS, int includePad) { POOL_GEO; poolAvg<2>(x, y, g, includePad); }

// pool_avg_bwd: dx at each input element = the sum, over the windows that
// cover it, of dy over the window's divisor.
template <int V> __device__ __forceinline__ void poolAvgBwd(const PS* dy, PS* dx, const PoolGeo& g, int includePad) {
	POOL_ROWS((i64)g.N * g.H * g.W) {
		const int w = (int)(r % g.W);
		const i64 t = r / g.W;
		const int h = (int)(t % g.H);
		const i64 n = t / g.H;
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
extern "C" __global__ void pool_avg_bwd(const PS* dy, PS* dx, POOL_PARAMS, int includePad) {
	POOL_GEO;
	poolAvgBwd<1>(dy, dx, g, includePad);
}
extern "C" __global__ void pool_avg_bwd2(const PS* dy, PS* dx, POOL_PARAMS, int includePad) {
	POOL_GEO;
	poolAvgBwd<2>(dy, dx, g, includePad);
}

#endif // K_pool
#endif // VD
