package nn_test

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// CTCLoss scores unaligned label sequences: here two steps of a uniform
// distribution over blank (0) and one label (1). Three paths, "1 1",
// "0 1" and "1 0", collapse to the target "1", so the loss is
// −log(3/4); a target "1 1" needs a blank between the labels and three
// steps, so it is impossible, which zeroInfinity turns into 0.
func ExampleCTCLoss() {
	logits := vram.Zeros(vram.Shape{2, 2, 2}).SetRequiresGrad(true) // [T, N, C]
	logProbs := logits.LogSoftmax(2)
	targets := vram.FromSlice([]int64{1, 0, 1, 1}, vram.Shape{2, 2}) // padded [N, S]
	inputLengths := vram.FromSlice([]int64{2, 2}, vram.Shape{2})
	targetLengths := vram.FromSlice([]int64{1, 2}, vram.Shape{2})

	perSample := nn.CTCLoss(logProbs, targets, inputLengths, targetLengths, 0, nn.ReductionNone, false)
	fmt.Println(perSample.Float32s())
	fmt.Printf("-log(3/4) = %.4f\n", -math.Log(0.75))

	loss := nn.CTCLoss(logProbs, targets, inputLengths, targetLengths, 0, nn.ReductionMean, true)
	fmt.Printf("mean %.4f\n", loss.Item())
	loss.Backward()
	fmt.Printf("%.4f\n", logits.Grad().Float32s())
	// Output:
	// [0.2876821 +Inf]
	// -log(3/4) = 0.2877
	// mean 0.1438
	// [0.0833 -0.0833 0.0000 0.0000 0.0833 -0.0833 0.0000 0.0000]
}
