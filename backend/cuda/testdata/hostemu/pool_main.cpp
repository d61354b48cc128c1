// pool_main.cpp runs pool.cu's float32 kernels on the host (shim.h): max
// and average pooling of channels-last tensors and their backward passes,
// with one, two and four channels a thread and grids that stride several
// times, against a float64 reference written from PyTorch's rules: a max
// window keeps its first largest value, its last NaN, or its first tap
// inside the input when all are -Inf; an average divides by the taps
// inside the padded input, or inside the input alone. The forward pass
// that keeps its taps (pool_max_taps) must give pool_max's output and
// pool_max_arg's taps, and the backward pass from them the same gradient.
// It prints PASS or FAIL.
#include <random>
#include <string>
#include <limits>
struct Geo { int N, H, W, C, kh, kw, sh, sw, ph, pw; int OH() const { return (H + 2 * ph - kh) / sh + 1; } int OW() const { return (W + 2 * pw - kw) / sw + 1; } };
static bool same(float a, double b, double tol) {
	if (std::isnan(b)) return std::isnan(a);
	if (std::isinf(b)) return a == b;
	return std::fabs(a - b) <= tol * (1 + std::fabs(b));
}
template <int V> int run(Geo g, int gy, bool special, bool includePad, const char* name) {
	std::mt19937 rng(11);
	std::uniform_int_distribution<int> small(-3, 3);
	std::normal_distribution<float> nd;
	const int OH = g.OH(), OW = g.OW();
	const i64 in = (i64)g.N * g.H * g.W * g.C, out = (i64)g.N * OH * OW * g.C;
	std::vector<float> x(in), dy(out);
	// Small integers make ties; special adds NaNs and -Inf.
	for (auto& v : x) {
		v = (float)small(rng);
		if (special) {
			int u = small(rng);
			if (u == 3) v = std::numeric_limits<float>::quiet_NaN();
			if (u <= -2) v = -std::numeric_limits<float>::infinity();
		}
	}
	for (auto& v : dy) v = nd(rng);
	auto X = [&](int n, int h, int w, int c) { return x[(((i64)n * g.H + h) * g.W + w) * g.C + c]; };
	std::vector<double> ymax(out), yavg(out), dxmax(in, 0), dxavg(in, 0);
	for (int n = 0; n < g.N; n++) for (int oh = 0; oh < OH; oh++) for (int ow = 0; ow < OW; ow++) for (int c = 0; c < g.C; c++) {
		const i64 o = (((i64)n * OH + oh) * OW + ow) * g.C + c;
		int hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
		double m = -INFINITY; int bh = -1, bw = -1; double s = 0; int inside = 0;
		for (int i = 0; i < g.kh; i++) for (int j = 0; j < g.kw; j++) {
			int h = hs + i, w = ws + j;
			if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
			double v = X(n, h, w, c);
			if (bh < 0) { bh = h; bw = w; }
			if (v > m || std::isnan(v)) { m = v; bh = h; bw = w; }
			s += v; inside++;
		}
		ymax[o] = m;
		dxmax[(((i64)n * g.H + bh) * g.W + bw) * g.C + c] += dy[o];
		int he = std::min(hs + g.kh, g.H + g.ph), we = std::min(ws + g.kw, g.W + g.pw);
		double div = includePad ? (double)(he - hs) * (we - ws) : inside;
		yavg[o] = s / div;
		for (int i = 0; i < g.kh; i++) for (int j = 0; j < g.kw; j++) {
			int h = hs + i, w = ws + j;
			if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
			dxavg[(((i64)n * g.H + h) * g.W + w) * g.C + c] += dy[o] / div;
		}
	}
	std::vector<float> y1(out), y2(out), y3(out), dx1(in), dx2(in), dx3(in);
	std::vector<unsigned char> arg(out), taps(out);
	const int ip = includePad;
#define GEO g.N, g.H, g.W, g.C, OH, OW, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw
	// Few blocks of few threads, so that the grid strides several times.
	const D3 grid{(unsigned)gy, 1, 1}, block{64, 1, 1};
#define PICK(K, ...) \
	launch(grid, block, [&] { if (V == 4) K##4(__VA_ARGS__); else if (V == 2) K##2(__VA_ARGS__); else K(__VA_ARGS__); })
	PICK(pool_max, x.data(), y1.data(), GEO);
	PICK(pool_avg, x.data(), y2.data(), GEO, ip);
	PICK(pool_max_arg, x.data(), arg.data(), GEO);
	PICK(pool_max_bwd, dy.data(), arg.data(), dx1.data(), GEO);
	PICK(pool_avg_bwd, dy.data(), dx2.data(), GEO, ip);
	// The forward pass that keeps its taps, and the backward pass from them.
	PICK(pool_max_taps, x.data(), y3.data(), taps.data(), GEO);
	PICK(pool_max_bwd, dy.data(), taps.data(), dx3.data(), GEO);
	int bad = 0;
	for (i64 i = 0; i < out; i++) bad += !same(y3[i], y1[i], 0) + (taps[i] != arg[i]);
	for (i64 i = 0; i < in; i++) bad += !same(dx3[i], dx1[i], 0);
	for (i64 i = 0; i < out; i++) bad += !same(y1[i], ymax[i], 0) + !same(y2[i], yavg[i], 1e-6);
	for (i64 i = 0; i < in; i++) bad += !same(dx1[i], dxmax[i], 1e-6) + !same(dx2[i], dxavg[i], 1e-6);
	printf("%s V=%d N=%d H=%d W=%d C=%d gy=%d: %d wrong\n", name, V, g.N, g.H, g.W, g.C, gy, bad);
	return bad ? 1 : 0;
}
int main() {
	int bad = 0;
	// ResNet's stem pooling, 3x3 stride 2 padded by 1, with odd sizes.
	bad += run<2>(Geo{2, 9, 7, 70, 3, 3, 2, 2, 1, 1}, 3, false, true, "3x3/2 pad 1");
	bad += run<1>(Geo{2, 9, 7, 33, 3, 3, 2, 2, 1, 1}, 2, true, true, "3x3/2 pad 1, NaN and -Inf");
	bad += run<2>(Geo{1, 8, 8, 64, 3, 3, 2, 2, 1, 1}, 1, true, false, "3x3/2 pad 1 exclude pad, NaN and -Inf");
	// Rectangular, overlapping, padding on one axis.
	bad += run<2>(Geo{2, 5, 6, 6, 2, 3, 1, 2, 1, 0}, 2, false, true, "2x3 stride 1x2 pad 1x0");
	bad += run<1>(Geo{2, 5, 6, 5, 2, 3, 1, 2, 1, 0}, 5, true, false, "2x3 stride 1x2 pad 1x0 exclude pad");
	// ResNet's head: the whole 7x7 image.
	bad += run<2>(Geo{3, 7, 7, 130, 7, 7, 7, 7, 0, 0}, 1, false, true, "global 7x7");
	// Four channels a thread (16-byte accesses).
	bad += run<4>(Geo{2, 9, 7, 64, 3, 3, 2, 2, 1, 1}, 3, true, true, "3x3/2 pad 1, V=4, NaN and -Inf");
	bad += run<4>(Geo{2, 5, 6, 12, 2, 3, 1, 2, 1, 0}, 2, false, false, "2x3 stride 1x2 pad 1x0, V=4, exclude pad");
	bad += run<4>(Geo{2, 7, 7, 132, 7, 7, 7, 7, 0, 0}, 1, false, true, "global 7x7, V=4");
	// Windows with gaps between them.
	bad += run<1>(Geo{1, 11, 10, 3, 2, 2, 3, 4, 1, 1}, 2, true, true, "2x2 stride 3x4 pad 1");
	printf(bad ? "FAIL\n" : "PASS\n");
	return bad;
}
