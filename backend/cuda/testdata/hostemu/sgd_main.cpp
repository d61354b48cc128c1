// sgd_main.cpp runs optim.cu's float32 sgd_multi on the host (shim.h) for
// SGD_MAX parameters of 1 to 2,048 elements (tiles of 256 elements), some on
// their first step (the mask's high bits included), with and without
// Nesterov momentum, and checks it bit for bit against sgd_step on each
// parameter alone. It prints PASS or FAIL.
#include <random>
int main() {
	std::mt19937 rng(3);
	std::normal_distribution<float> nd;
	std::uniform_int_distribution<int> sizes(1, 2048);
	const int nt = SGD_MAX;
	i64 ns[nt];
	for (int t = 0; t < nt; t++) ns[t] = t % 5 == 0 ? 1 + t % 3 : sizes(rng);
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
		const u64 first = 0xa5a5000000005a5aull;
		// reference: sgd_step per tensor
		for (int t = 0; t < nt; t++)
			launch(D3{2, 1, 1}, D3{64, 1, 1}, [&] { sgd_step(p[t].data(), g[t].data(), b[t].data(), ns[t], neglr, mom, damp1, wd, 1, (int)((first >> t) & 1), nesterov); });
		unsigned blocks = 0; // SGD_TILE elements a block, as SGDSteps sizes the grid
		for (int t = 0; t < nt; t++) blocks += (ns[t] + SGD_TILE - 1) / SGD_TILE;
		launch(D3{blocks, 1, 1}, D3{64, 1, 1}, [&] {
#define A(t) p2[t].data(), g[t].data(), b2[t].data(), ns[t]
			sgd_multi(neglr, mom, damp1, wd, 1, nesterov, nt, first,
				A(0), A(1), A(2), A(3), A(4), A(5), A(6), A(7),
				A(8), A(9), A(10), A(11), A(12), A(13), A(14), A(15),
				A(16), A(17), A(18), A(19), A(20), A(21), A(22), A(23),
				A(24), A(25), A(26), A(27), A(28), A(29), A(30), A(31),
				A(32), A(33), A(34), A(35), A(36), A(37), A(38), A(39),
				A(40), A(41), A(42), A(43), A(44), A(45), A(46), A(47),
				A(48), A(49), A(50), A(51), A(52), A(53), A(54), A(55),
				A(56), A(57), A(58), A(59), A(60), A(61), A(62), A(63));
#undef A
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
