// Package dataset generates the small classification problems that vram's
// demo and tests train on, deterministically from a seed.
//
// [Spirals] draws K interleaved spiral arms in the plane (one class per arm,
// K = 3 by default) with Gaussian noise, appends a few features of pure noise
// that a model has to learn to ignore, and splits the points into a training
// [Set] and a held-out test [Set] with the same share of every class.
// A Set keeps its features and labels as Go slices; [Set.Tensors] and
// [Set.Batch] turn them, or a mini-batch of them, into vram tensors on any
// device. A [Sampler] deals shuffled mini-batch indices epoch after epoch.
//
// Every random number comes from a math/rand/v2 PCG source seeded by
// [Config].Seed, so the same configuration gives the same points, split and
// batches on every machine and for any number of cores.
package dataset
