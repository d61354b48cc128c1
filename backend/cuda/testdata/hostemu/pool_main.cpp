// pool_main.cpp runs norm.cu's float32 maxpool_nhwc_bwd on the host (shim.h)
// for overlapping, adjoining and padded windows, on values with many ties
// and a few NaNs, and checks it bit for bit against a reference that
// scatters each window's gradient to its first maximum (row-major, NaN
// first when there is one), as PyTorch does. It prints PASS or FAIL.
#include <random>
static bool hostmax(float v, float m) { return v == m || (std::isnan(v) && std::isnan(m)); }
static int run(int N, int H, int W, int C, int k, int s, int p) {
	std::mt19937 rng(11);
	std::uniform_int_distribution<int> small(-3, 3);
	std::normal_distribution<float> nd;
	std::vector<float> x((size_t)N * H * W * C);
	for (auto& v : x) v = (float)small(rng);
	for (size_t i = 0; i < x.size(); i += 37) x[i] = NAN;
	const int OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
	std::vector<float> y((size_t)N * OH * OW * C), dy(y.size()), ref(x.size(), 0.0f), dx(x.size(), -1.0f);
	for (auto& v : dy) v = nd(rng);
	auto X = [&](int n, int h, int w, int c) { return (((size_t)n * H + h) * W + w) * C + c; };
	for (int n = 0; n < N; n++)
		for (int oh = 0; oh < OH; oh++)
			for (int ow = 0; ow < OW; ow++)
				for (int c = 0; c < C; c++) {
					float m = -INFINITY;
					size_t arg = 0;
					bool any = false;
					for (int ky = 0; ky < k; ky++)
						for (int kx = 0; kx < k; kx++) {
							int h = oh * s - p + ky, w = ow * s - p + kx;
							if (h < 0 || h >= H || w < 0 || w >= W) continue;
							float v = x[X(n, h, w, c)];
							if (!any || std::isnan(v) && !std::isnan(m) || v > m) m = v, arg = X(n, h, w, c), any = true;
						}
					size_t yi = (((size_t)n * OH + oh) * OW + ow) * C + c;
					y[yi] = m;
					ref[arg] += dy[yi];
				}
	launch(D3{5, 1, 1}, D3{64, 1, 1}, [&] {
		maxpool_nhwc_bwd(dy.data(), x.data(), y.data(), dx.data(), N, H, W, C, OH, OW, k, k, s, s, p, p);
	});
	int bad = 0;
	for (size_t i = 0; i < x.size(); i++)
		if (memcmp(&dx[i], &ref[i], 4) != 0) bad++;
	printf("N=%d H=%d W=%d C=%d k=%d s=%d p=%d: %d of %zu elements differ\n", N, H, W, C, k, s, p, bad, x.size());
	return bad;
}
int main() {
	int bad = run(2, 9, 7, 5, 3, 2, 1) + run(1, 8, 8, 3, 2, 2, 0) + run(2, 7, 5, 4, 3, 1, 1) +
		  run(1, 6, 6, 2, 3, 3, 0) + run(1, 5, 9, 3, 1, 1, 0) + run(1, 12, 10, 1, 5, 2, 2);
	printf(bad ? "FAIL\n" : "PASS\n");
	return bad != 0;
}
