package nn_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// posEnc is a caller's layer with a floating-point buffer beside an
// integer one, as a positional encoding or a rotary cache is kept.
type posEnc struct {
	nn.Base
	Table, Steps *vram.Tensor
}

func newPosEnc(opts ...vram.Option) *posEnc {
	m := &posEnc{
		Table: vram.Ones(vram.Shape{4, 2}, opts...),
		Steps: vram.Zeros(vram.Shape{}, vram.Int64),
	}
	m.RegisterBuffer("table", m.Table)
	m.RegisterBuffer("steps", m.Steps)
	return m
}

func (m *posEnc) Forward(x *vram.Tensor) *vram.Tensor { return x.Add(m.Table) }

// TestConvertDTypeBuffers checks that floating-point buffers follow the
// model's dtype as PyTorch's model.half(), bfloat16() and double() cast
// them, normalization layers keeping theirs float32 in 16 bits as they
// keep their parameters, and that integer buffers stay as they are.
func TestConvertDTypeBuffers(t *testing.T) {
	type bufs map[string]vram.DType
	tests := []struct {
		name    string
		mk      func() nn.Module
		convert func(nn.Module)
		want    bufs
	}{
		{"Half", func() nn.Module { return newPosEnc() }, func(m nn.Module) { m.(*posEnc).Half() },
			bufs{"table": vram.Float16, "steps": vram.Int64}},
		{"BFloat16", func() nn.Module { return newPosEnc() }, func(m nn.Module) { m.(*posEnc).BFloat16() },
			bufs{"table": vram.BFloat16, "steps": vram.Int64}},
		{"Float back", func() nn.Module { return newPosEnc(vram.Float16) }, func(m nn.Module) { m.(*posEnc).Float() },
			bufs{"table": vram.Float32, "steps": vram.Int64}},
		{"ConvertDType", func() nn.Module { return newPosEnc() }, func(m nn.Module) { nn.ConvertDType(m, vram.Float16) },
			bufs{"table": vram.Float16, "steps": vram.Int64}},
		{"Sequential Half", func() nn.Module { return nn.NewSequential(newPosEnc(), nn.NewBatchNorm1d(2)) },
			func(m nn.Module) { m.(*nn.Sequential).Half() },
			bufs{"0.table": vram.Float16, "0.steps": vram.Int64, "1.running_mean": vram.Float32,
				"1.running_var": vram.Float32, "1.num_batches_tracked": vram.Int64}},
		{"BatchNorm2d double", func() nn.Module { return nn.NewBatchNorm2d(2) }, func(m nn.Module) { m.(*nn.BatchNorm2d).ToDType(vram.Float64) },
			bufs{"running_mean": vram.Float64, "running_var": vram.Float64, "num_batches_tracked": vram.Int64}},
		{"BatchNorm2d double then Half", func() nn.Module { return nn.NewBatchNorm2d(2, vram.Float64) },
			func(m nn.Module) { m.(*nn.BatchNorm2d).Half() },
			bufs{"running_mean": vram.Float32, "running_var": vram.Float32, "num_batches_tracked": vram.Int64}},
		{"InstanceNorm2d double", func() nn.Module {
			return nn.NewInstanceNorm2d(2, nn.InstanceNormOptions{Affine: true, TrackRunningStats: true})
		}, func(m nn.Module) { nn.ConvertDType(m, vram.Float64) },
			bufs{"running_mean": vram.Float64, "running_var": vram.Float64, "num_batches_tracked": vram.Int64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.mk()
			defer nn.Release(m)
			tt.convert(m)
			got := bufs{}
			for _, b := range nn.NamedBuffers(m) {
				got[b.Name] = b.Tensor.DType()
			}
			for name, dt := range tt.want {
				if got[name] != dt {
					t.Errorf("buffer %q is %v, want %v", name, got[name], dt)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("buffers %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBatchNormDoubleForward runs a batch norm converted to float64, its
// running statistics with it, in training and evaluation mode.
func TestBatchNormDoubleForward(t *testing.T) {
	for _, eval := range []bool{false, true} {
		l := nn.NewBatchNorm2d(2)
		l.ToDType(vram.Float64)
		if eval {
			l.Eval()
		}
		x := vram.Arange(0, 16, 1, vram.Float64).Reshape(2, 2, 2, 2)
		y := l.Forward(x)
		if y.DType() != vram.Float64 {
			t.Errorf("eval %v: output %v, want float64", eval, y.DType())
		}
		want := 0.0
		if !eval {
			want = 0.1 * 5.5 // momentum times the batch mean of channel 0
		}
		if got := l.RunningMean.Float64s()[0]; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("eval %v: running mean %v, want %v", eval, got, want)
		}
		y.Release()
		x.Release()
		nn.Release(l)
	}
}
