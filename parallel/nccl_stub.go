package parallel

// This file holds the seam between InitProcessGroup and the NCCL
// communicators, which live in their own file of this package. Until that
// file is part of the build, both functions below report that NCCL is not
// available; when it is, this file goes away.

import (
	"errors"

	"github.com/vramgo/vram"
)

// errNCCLUnavailable is the error of the NCCL backend in a build without
// NCCL communicators.
var errNCCLUnavailable = errors.New("parallel: the nccl backend is not available in this build; use the tcp backend (ProcessGroupOptions.Backend \"tcp\") for CPU and sim devices")

// ncclUniqueID returns a new NCCL unique id (ncclGetUniqueId), which rank
// 0 shares with the other ranks.
func ncclUniqueID() ([128]byte, error) { return [128]byte{}, errNCCLUnavailable }

// NewNCCLRank joins rank of a group of size ranks on the CUDA device dev
// through NCCL (ncclCommInitRank), with the unique id that rank 0 made.
func NewNCCLRank(rank, size int, dev vram.Device, id [128]byte) (Communicator, error) {
	return nil, errNCCLUnavailable
}
