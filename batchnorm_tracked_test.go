package vram

import (
	"errors"
	"fmt"
	"testing"
)

// TestBatchNorm2dTracked checks that the tracked batch norms count a batch
// in training mode only, on every device at hand (on CUDA, channels-last
// batches are counted by the batch-norm kernels themselves), and give what
// the untracked ones give.
func TestBatchNorm2dTracked(t *testing.T) {
	devs := []Device{CPU}
	if Sim(0).Available() {
		devs = append(devs, Sim(0))
	}
	if DeviceCount() > 0 {
		devs = append(devs, CUDA(0))
	}
	for _, d := range devs {
		for _, tc := range []struct {
			relu, residual, channelsLast, training bool
		}{
			{false, false, false, true}, {false, false, true, true}, {true, false, true, true},
			{true, true, true, true}, {true, true, false, true}, {false, false, true, false},
			{true, true, true, false},
		} {
			name := fmt.Sprintf("%s/relu=%v residual=%v channels-last=%v training=%v", d, tc.relu, tc.residual, tc.channelsLast, tc.training)
			t.Run(name, func(t *testing.T) {
				f := ContiguousFormat
				if tc.channelsLast {
					f = ChannelsLast
				}
				// float32 throughout, as the CUDA kernels take it
				f32 := func(t *Tensor) *Tensor { return t.Cast(Float32).To(d) }
				x := f32(rnd(1, 4, 8, 5, 6)).Contiguous(f)
				var r *Tensor
				if tc.residual {
					r = f32(rnd(2, 4, 8, 5, 6)).Contiguous(f)
				}
				w, b := f32(rnd(3, 8)), f32(rnd(4, 8))
				stats := func() (*Tensor, *Tensor) { return f32(rnd(5, 8)), f32(pos(6, 8)) }
				counter := Zeros(Shape{}, Int64, d)
				m1, v1 := stats()
				m2, v2 := stats()
				var got, want *Tensor
				for range 3 {
					if tc.relu {
						got = BatchNorm2dReLUTracked(x, r, w, b, m1, v1, counter, tc.training, 0.1, 1e-5)
						want = BatchNorm2dReLU(x, r, w, b, m2, v2, tc.training, 0.1, 1e-5)
					} else {
						got = BatchNorm2dTracked(x, w, b, m1, v1, counter, tc.training, 0.1, 1e-5)
						want = BatchNorm2d(x, w, b, m2, v2, tc.training, 0.1, 1e-5)
					}
				}
				wantCount := int64(0)
				if tc.training {
					wantCount = 3
				}
				if n := counter.Int64s()[0]; n != wantCount {
					t.Errorf("counter %d after 3 batches, want %d", n, wantCount)
				}
				for _, p := range [][2]*Tensor{{got, want}, {m1, m2}, {v1, v2}} {
					g, w := p[0].Float64s(), p[1].Float64s()
					for i := range g {
						if g[i] != w[i] {
							t.Fatalf("element %d: tracked %v, untracked %v", i, g[i], w[i])
						}
					}
				}
			})
		}
	}
}

// TestBatchNorm2dTrackedRefusals checks the counters the tracked batch
// norms refuse, and that a refusal counts nothing.
func TestBatchNorm2dTrackedRefusals(t *testing.T) {
	x := rnd(1, 2, 3, 2, 2)
	tests := []struct {
		name    string
		counter *Tensor
		kind    error
	}{
		{"float counter", Zeros(Shape{}, Float32), ErrArgument},
		{"two counters", Zeros(Shape{2}, Int64), ErrArgument},
	}
	if Sim(0).Available() {
		tests = append(tests, struct {
			name    string
			counter *Tensor
			kind    error
		}{"counter on another device", Zeros(Shape{}, Int64, Sim(0)), ErrDevice})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.counter.Float64s()
			for _, f := range []func(){
				func() { BatchNorm2dTracked(x, nil, nil, nil, nil, tc.counter, true, 0.1, 1e-5) },
				func() { BatchNorm2dReLUTracked(x, nil, nil, nil, nil, nil, tc.counter, true, 0.1, 1e-5) },
			} {
				err := Catch(f)
				if !errors.Is(err, tc.kind) {
					t.Errorf("error %v, want %v", err, tc.kind)
				}
			}
			if after := tc.counter.Float64s(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("counter changed from %v to %v", before, after)
			}
		})
	}
}
