package nn

import "github.com/vramgo/vram"

// MSELoss returns the mean squared error between pred and target, which
// broadcast against each other (torch.nn.functional.mse_loss with mean
// reduction). It is [vram.MSELoss].
func MSELoss(pred, target *vram.Tensor) *vram.Tensor { return vram.MSELoss(pred, target) }

// CrossEntropyLoss returns the mean negative log-likelihood of the int64
// class indices targets [N] under logits [N, C]
// (torch.nn.functional.cross_entropy with mean reduction). It is
// [vram.CrossEntropy].
func CrossEntropyLoss(logits, targets *vram.Tensor) *vram.Tensor {
	return vram.CrossEntropy(logits, targets)
}
