// sgd_main.cpp runs optim.cu's float32 sgd_multi on the host (shim.h) for
// 12 parameters of 1 to 2,048 elements (tiles of 256 elements), some on their first step, with and
// without Nesterov momentum, and checks it bit for bit against sgd_step on
// each parameter alone. It prints PASS or FAIL.
#include <random>
int main() {
	std::mt19937 rng(3);
	std::normal_distribution<float> nd;
	const int nt = 12;
	i64 ns[nt] = {1, 64, 1000, 2011, 3, 2048, 7, 512, 100, 5, 999, 33};
	std::vector<std::vector<float>> p(nt), g(nt), b(nt), p2, b2;
	for (int t = 0; t < nt; t++) {
		p[t].resize(ns[t]); g[t].resize(ns[t]); b[t].resize(ns[t]);
		for (auto& v : p[t]) v = nd(rng);
		for (auto& v : g[t]) v = nd(rng);
		for (auto& v : b[t]) v = nd(rng);
	}
	p2 = p; b2 = b;
	double neglr = -0.05, mom = 0.9, damp1 = 0.9, wd = 0.01;
	for (int nesterov = 0; nesterov < 2; nesterov++) {
		unsigned first = 0x5a5 & ((1u << nt) - 1);
		// reference: sgd_step per tensor
		for (int t = 0; t < nt; t++)
			launch(D3{2, 1, 1}, D3{64, 1, 1}, [&] { sgd_step(p[t].data(), g[t].data(), b[t].data(), ns[t], neglr, mom, damp1, wd, 1, (first >> t) & 1, nesterov); });
		unsigned blocks = 0; // SGD_TILE elements a block, as SGDSteps sizes the grid
		for (int t = 0; t < nt; t++) blocks += (ns[t] + SGD_TILE - 1) / SGD_TILE;
		launch(D3{blocks, 1, 1}, D3{64, 1, 1}, [&] {
			auto P = [&](int t) { return p2[t].data(); };
			auto G = [&](int t) { return g[t].data(); };
			auto B = [&](int t) { return b2[t].data(); };
			sgd_multi(neglr, mom, damp1, wd, 1, nesterov, nt, first,
				P(0), G(0), B(0), ns[0], P(1), G(1), B(1), ns[1], P(2), G(2), B(2), ns[2], P(3), G(3), B(3), ns[3],
				P(4), G(4), B(4), ns[4], P(5), G(5), B(5), ns[5], P(6), G(6), B(6), ns[6], P(7), G(7), B(7), ns[7],
				P(8), G(8), B(8), ns[8], P(9), G(9), B(9), ns[9], P(10), G(10), B(10), ns[10], P(11), G(11), B(11), ns[11]);
		});
		int bad = 0;
		for (int t = 0; t < nt; t++)
			for (i64 i = 0; i < ns[t]; i++)
				if (p[t][i] != p2[t][i] || b[t][i] != b2[t][i]) bad++;
		printf("nesterov=%d: %d elements differ\n", nesterov, bad);
		if (bad) return 1;
	}
	printf("PASS\n");
	return 0;
}
