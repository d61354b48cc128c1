package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// CrossEntropyLoss and NLLLoss take what torch.nn.functional's
// cross_entropy and nll_loss take with their defaults: extra dimensions
// [N, C, d...], one unbatched sample [C] and, for cross_entropy, class
// probabilities of the input's shape.
func TestClassLossDefaultsTakeEveryForm(t *testing.T) {
	vram.Tidy(func() {
		logits3 := []float64{0.3, -0.4, 1.2, 0.9, -1.1, 0.2, 2.2, 0.6, -0.7, 1.4, 0.05, -0.25}
		probs := []float64{0.1, 0.2, 0.7, 0.5, 0.5, 0, 0, 0, 1, 0.3, 0.3, 0.4}
		cases := []struct {
			name    string
			shape   []int
			targets *vram.Tensor
			want    float64
		}{
			{"extra dimensions", []int{2, 3, 2}, vram.FromSlice([]int64{2, -100, 0, 1}, vram.Shape{2, 2}), func() float64 {
				per, den := refClassLoss(refRows(logits3, []int{2, 3, 2}), []int64{2, -100, 0, 1}, nil, -100, 0)
				return reduceRef(per, den, nn.ReductionMean)[0]
			}()},
			{"unbatched", []int{3}, vram.Scalar(1, vram.Int64), refRows(logits3[:3], []int{3})[0][1] * -1},
			{"probabilities", []int{4, 3}, vram.FromSlice(probs, vram.Shape{4, 3}), func() float64 {
				return reduceRef(refSoftLoss(refRows(logits3, []int{4, 3}), probs, []int{4, 3}, nil, 0), 4, nn.ReductionMean)[0]
			}()},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				n := 1
				for _, s := range c.shape {
					n *= s
				}
				x := vram.FromSlice(logits3[:n], vram.Shape(c.shape))
				var got float64
				if err := vram.Catch(func() { got = nn.CrossEntropyLoss(x, c.targets).Item() }); err != nil || !near(got, c.want, 1e-12) {
					t.Errorf("CrossEntropyLoss %v (error %v), want %v", got, err, c.want)
				}
				if c.targets.DType().IsFloat() {
					return
				}
				lsm := x.LogSoftmax(min(1, len(c.shape)-1))
				if err := vram.Catch(func() { got = nn.NLLLoss(lsm, c.targets).Item() }); err != nil || !near(got, c.want, 1e-12) {
					t.Errorf("NLLLoss %v (error %v), want %v", got, err, c.want)
				}
			})
		}
	})
}

// As in PyTorch, targets of the input's shape are class probabilities and
// targets of its shape without the class dimension class indices: the
// wrong dtype for its shape is an ErrDType error, a shape that is neither
// an ErrShape error.
func TestClassLossTargetForms(t *testing.T) {
	vram.Tidy(func() {
		x := vram.Zeros(vram.Shape{3, 4})
		cases := []struct {
			name string
			fn   func()
			kind error
		}{
			{"float indices", func() {
				nn.CrossEntropyLossWith(x, vram.FromSlice([]float64{0, 1, 2}, vram.Shape{3}), nn.CrossEntropyOptions{})
			}, vram.ErrDType},
			{"float indices default", func() { nn.CrossEntropyLoss(x, vram.FromSlice([]float64{0, 1, 2}, vram.Shape{3})) }, vram.ErrDType},
			{"integer probabilities", func() { nn.CrossEntropyLossWith(x, vram.Zeros(vram.Shape{3, 4}, vram.Int64), nn.CrossEntropyOptions{}) }, vram.ErrDType},
			{"integer probabilities default", func() { nn.CrossEntropyLoss(x, vram.Zeros(vram.Shape{3, 4}, vram.Int64)) }, vram.ErrDType},
			{"nll float indices", func() {
				nn.NLLLossWith(x, vram.FromSlice([]float64{0, 1, 2}, vram.Shape{3}), nn.NLLLossOptions{Reduction: nn.ReductionSum})
			}, vram.ErrDType},
			{"nll of probabilities", func() { nn.NLLLossWith(x, vram.Zeros(vram.Shape{3, 4}), nn.NLLLossOptions{}) }, vram.ErrShape},
			{"float of neither shape", func() { nn.CrossEntropyLossWith(x, vram.Zeros(vram.Shape{4}), nn.CrossEntropyOptions{}) }, vram.ErrShape},
			{"integer of neither shape", func() { nn.CrossEntropyLossWith(x, vram.Zeros(vram.Shape{4}, vram.Int64), nn.CrossEntropyOptions{}) }, vram.ErrShape},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				err := vram.Catch(c.fn)
				var e *vram.Error
				if !errors.Is(err, c.kind) || !errors.As(err, &e) || (e.Op != "cross_entropy" && e.Op != "nll_loss") {
					t.Fatalf("error %v, want %v of the loss", err, c.kind)
				}
			})
		}
	})
}
