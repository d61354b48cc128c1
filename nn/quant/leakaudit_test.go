package quant_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn/quant"
)

// TestAffineReleasesWhatItMakes checks that quantizing and dequantizing
// leave nothing behind: with the caller releasing the result, and inside
// a vram.Tidy that the result does not escape.
func TestAffineReleasesWhatItMakes(t *testing.T) {
	d := vram.Sim(0)
	tests := []struct {
		name string
		run  func(x, scales, zps *vram.Tensor) (*vram.Tensor, error)
	}{
		{"PerTensor", func(x, _, _ *vram.Tensor) (*vram.Tensor, error) { return quant.PerTensor(x, 0.1, 3) }},
		{"PerChannel", func(x, s, z *vram.Tensor) (*vram.Tensor, error) { return quant.PerChannel(x, s, z, 1) }},
		{"DequantizePerTensor", func(x, _, _ *vram.Tensor) (*vram.Tensor, error) {
			q, err := quant.PerTensor(x, 0.1, 3)
			if err != nil {
				return nil, err
			}
			defer q.Release()
			return quant.DequantizePerTensor(q, 0.1, 3)
		}},
		{"DequantizePerChannel", func(x, s, z *vram.Tensor) (*vram.Tensor, error) {
			q, err := quant.PerChannel(x, s, z, 1)
			if err != nil {
				return nil, err
			}
			defer q.Release()
			return quant.DequantizePerChannel(q, s, z, 1)
		}},
	}
	for _, tidy := range []bool{false, true} {
		for _, tc := range tests {
			name := tc.name
			if tidy {
				name += " in Tidy"
			}
			t.Run(name, func(t *testing.T) {
				x := vram.Randn(vram.Shape{2, 3}, d)
				s := vram.FromSlice([]float32{0.1, 0.2, 0.05}, vram.Shape{3}, d)
				z := vram.FromSlice([]int64{0, 1, -2}, vram.Shape{3}, d)
				defer x.Release()
				defer s.Release()
				defer z.Release()
				memtest.Settle(d)
				before := vram.Storage(d)
				run := func() {
					out, err := tc.run(x, s, z)
					if err != nil {
						t.Fatal(err)
					}
					if !tidy {
						out.Release()
					}
				}
				if tidy {
					vram.Tidy(run)
				} else {
					run()
				}
				now := vram.Storage(d)
				if now.LiveBytes != before.LiveBytes || now.Allocs-before.Allocs != now.Frees-before.Frees || now.Leaked != before.Leaked {
					t.Errorf("%d storages made, %d freed, %d left to the collector; %d bytes live, %d before",
						now.Allocs-before.Allocs, now.Frees-before.Frees, now.Leaked-before.Leaked, now.LiveBytes, before.LiveBytes)
				}
			})
		}
	}
}
