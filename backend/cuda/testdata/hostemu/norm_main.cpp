// norm_main.cpp runs norm.cu's float32 kernels on the host (shim.h): the
// channels-last batch norm of a residual block's end, y = max(0, bn(x) +
// r), and its backward pass (dy masked by y, dr, dscale, dbias, dx), with
// one and two channels a thread, part-filled blocks and several block rows
// of partial sums (more than the finishing kernels' threads a channel),
// against a float64 reference. The backward pass runs in
// each way batchnorm.go launches it: unmasked (BatchNormBackward), masked
// with g stored by the first pass (in dr, else in dx) for the second, the
// same with a second part dy2 of the gradient, and masked by the second
// pass itself. It prints PASS or FAIL.
#include <random>
#include <string>
static double maxerr(const std::vector<float>& a, const std::vector<double>& b, double scale) {
	double m = 0;
	for (size_t i = 0; i < a.size(); i++) m = std::max(m, std::fabs(a[i] - b[i]) / (scale + std::fabs(b[i])));
	return m;
}
// Ways of running the backward pass.
enum { plain, stored, summed, direct };
template <int V> int run(i64 M, int C, int gy, bool residual, int way) {
	std::mt19937 rng(7);
	std::normal_distribution<float> nd;
	std::vector<float> x(M * C), r(M * C, 0), dy(M * C), dy2(M * C), scale(C), bias(C), rm(C, 0), rv(C, 1);
	for (auto& v : x) v = 3 * nd(rng) + 0.5f;
	if (residual) for (auto& v : r) v = nd(rng);
	for (auto& v : dy) v = nd(rng);
	for (auto& v : dy2) v = nd(rng);
	for (auto& v : scale) v = nd(rng);
	for (auto& v : bias) v = nd(rng);
	const double eps = 1e-5;
	// reference
	std::vector<double> mean(C, 0), var(C, 0), inv(C), yref(M * C), g(M * C), dbias(C, 0), dscale(C, 0), dxref(M * C);
	for (i64 i = 0; i < M; i++) for (int c = 0; c < C; c++) mean[c] += x[i * C + c] / (double)M;
	for (i64 i = 0; i < M; i++) for (int c = 0; c < C; c++) { double d = x[i * C + c] - mean[c]; var[c] += d * d / M; }
	for (int c = 0; c < C; c++) inv[c] = 1 / std::sqrt(var[c] + eps);
	for (i64 i = 0; i < M; i++) for (int c = 0; c < C; c++) {
		double pre = (x[i * C + c] - mean[c]) * inv[c] * scale[c] + bias[c] + r[i * C + c];
		yref[i * C + c] = std::max(0.0, pre);
	}
	int gx = (C + 32 * V - 1) / (32 * V);
	std::vector<float> part(2 * gy * C + 2 * C), smean(C), sinv(C), y(M * C), dx(M * C), dr(M * C), ds(C), db(C);
	const float* rp = residual ? r.data() : nullptr;
	std::string sfx = V == 2 ? "2" : "";
	launch(D3{(unsigned)gx, (unsigned)gy, 1}, D3{32, 8, 1}, [&] { if (V == 2) bn_nhwc_stats2(x.data(), M, C, part.data()); else bn_nhwc_stats(x.data(), M, C, part.data()); });
	launch(D3{(unsigned)((C + 31) / 32), 1, 1}, D3{32, 32, 1}, [&] { bn_nhwc_finish(x.data(), part.data(), gy, C, M, eps, 0.1, 1, rm.data(), rv.data(), smean.data(), sinv.data(), nullptr); });
	launch(D3{(unsigned)gx, 4, 1}, D3{32, 8, 1}, [&] { if (V == 2) bn_nhwc_apply2(x.data(), y.data(), M, C, smean.data(), sinv.data(), scale.data(), bias.data(), 0, eps, rp, 1); else bn_nhwc_apply(x.data(), y.data(), M, C, smean.data(), sinv.data(), scale.data(), bias.data(), 0, eps, rp, 1); });
	// backward reference from the kernels' own y
	for (i64 i = 0; i < M * C; i++) {
		float d = way == summed ? dy[i] + dy2[i] : dy[i];
		g[i] = way == plain || y[i] > 0 ? d : 0;
	}
	for (i64 i = 0; i < M; i++) for (int c = 0; c < C; c++) { dbias[c] += g[i * C + c]; dscale[c] += g[i * C + c] * (x[i * C + c] - mean[c]) * inv[c]; }
	for (i64 i = 0; i < M; i++) for (int c = 0; c < C; c++) {
		double xh = (x[i * C + c] - mean[c]) * inv[c];
		dxref[i * C + c] = scale[c] * inv[c] * (g[i * C + c] - dbias[c] / M - xh * dscale[c] / M);
	}
	float* coef = part.data() + 2 * gy * C;
	float* drp = residual ? dr.data() : nullptr;
	const float* yp = way == plain ? nullptr : y.data();
	const float* dy2p = way == summed ? dy2.data() : nullptr;
	float* dst = way == stored || way == summed ? (residual ? dr.data() : dx.data()) : nullptr;
	launch(D3{(unsigned)gx, (unsigned)gy, 1}, D3{32, 8, 1}, [&] { if (V == 2) bn_nhwc_bwd_stats2(dy.data(), x.data(), M, C, smean.data(), part.data(), yp, dy2p, dst); else bn_nhwc_bwd_stats(dy.data(), x.data(), M, C, smean.data(), part.data(), yp, dy2p, dst); });
	launch(D3{(unsigned)((C + 31) / 32), 1, 1}, D3{32, 32, 1}, [&] { bn_nhwc_bwd_finish(part.data(), gy, C, M, sinv.data(), ds.data(), db.data(), coef); });
	// The second pass reads what the first stored, or dy and the mask.
	const float* gin = dst ? dst : dy.data();
	const float* mask = dst ? nullptr : yp;
	float* gout = dst ? nullptr : drp;
	launch(D3{(unsigned)gx, 4, 1}, D3{32, 8, 1}, [&] { if (V == 2) bn_nhwc_bwd_apply2(gin, x.data(), dx.data(), M, C, smean.data(), sinv.data(), scale.data(), coef, mask, gout); else bn_nhwc_bwd_apply(gin, x.data(), dx.data(), M, C, smean.data(), sinv.data(), scale.data(), coef, mask, gout); });
	double ey = maxerr(y, yref, 1), edx = maxerr(dx, dxref, 1);
	std::vector<double> dsr(dscale.begin(), dscale.end()), dbr(dbias.begin(), dbias.end());
	double eds = maxerr(ds, dsr, M), edb = maxerr(db, dbr, M);
	double edr = 0;
	if (residual && way != plain) edr = maxerr(dr, g, 0.0 + 1e-30);
	int zeros = 0; for (auto v : y) zeros += v == 0;
	printf("V=%d M=%lld C=%d gy=%d residual=%d way=%d: y %.2e dx %.2e dscale %.2e dbias %.2e dr %.2e (relu zeros %d of %lld)\n", V, (long long)M, C, gy, residual, way, ey, edx, eds, edb, edr, zeros, (long long)(M * C));
	return ey < 1e-5 && edx < 1e-4 && eds < 1e-5 && edb < 1e-5 && edr == 0 ? 0 : 1;
}
int main() {
	int bad = 0;
	for (int way : {plain, stored, summed, direct}) {
		bad += run<2>(105, 70, 3, true, way);
		bad += run<2>(64, 64, 2, false, way);
		bad += run<1>(45, 33, 2, true, way);
		bad += run<1>(300, 5, 5, false, way);
		// More block rows than the finishing kernels' threads a channel.
		bad += run<2>(1300, 10, 150, true, way);
	}
	printf(bad ? "FAIL\n" : "PASS\n");
	return bad;
}
