package nccl

import (
	"fmt"

	"github.com/ebitengine/purego"

	"github.com/vramgo/vram/native/cuda"
)

// GetVersion returns the loaded library's NCCL_VERSION_CODE (22803 for
// NCCL 2.28.3; see [VersionString]). It calls ncclGetVersion.
func GetVersion() (int, error) {
	var v int32
	err := call("ncclGetVersion", func() Result { return ncclGetVersion(&v) })
	return int(v), err
}

// GetUniqueID makes the id of a new communicator, to be handed to every
// rank's [CommInitRank]. It calls ncclGetUniqueId, which opens the
// bootstrap's listening socket on this host: call it on one rank (rank 0)
// only.
func GetUniqueID() (UniqueID, error) {
	var id UniqueID
	err := call("ncclGetUniqueId", func() Result { return ncclGetUniqueId(&id) })
	return id, err
}

// CommInitRank creates rank's communicator of a group of nranks that share
// id, on the CUDA device of the calling thread's current context (lock the
// thread and make the device's primary context current first; see
// cuda.Context.Do). It calls ncclCommInitRank, the id passed by value, and
// blocks until every rank has called it.
func CommInitRank(nranks int, id UniqueID, rank int) (Comm, error) {
	var c Comm
	err := call("ncclCommInitRank", func() Result {
		return ncclCommInitRank(&c, int32(nranks), uniqueIDArg{internal: id}, int32(rank))
	})
	return c, err
}

// CommInitRankConfig is [CommInitRank] with a configuration. It calls
// ncclCommInitRankConfig. A nonblocking communicator ([Config] Blocking
// false) may be returned with [ErrInProgress]: it is then usable only once
// [CommGetAsyncError] no longer reports ncclInProgress, and may be aborted
// before.
func CommInitRankConfig(nranks int, id UniqueID, rank int, cfg Config) (Comm, error) {
	var c Comm
	arg := cfg.arg()
	err := call("ncclCommInitRankConfig", func() Result {
		return ncclCommInitRankConfig(&c, int32(nranks), uniqueIDArg{internal: id}, int32(rank), &arg)
	})
	return c, err
}

// CommInitAll creates one communicator per CUDA device of devices (device
// ordinals, each once), rank i on devices[i], for one process driving them
// all. It calls ncclCommInitAll.
func CommInitAll(devices []int) ([]Comm, error) {
	if !lib.Ready() {
		return nil, ErrNotLoaded
	}
	if len(devices) == 0 {
		return nil, fmt.Errorf("nccl: ncclCommInitAll: no devices")
	}
	comms := make([]Comm, len(devices))
	list := make([]int32, len(devices))
	for i, d := range devices {
		list[i] = int32(d)
	}
	err := call("ncclCommInitAll", func() Result { return ncclCommInitAll(&comms[0], int32(len(list)), &list[0]) })
	if err != nil {
		return nil, err
	}
	return comms, nil
}

// CommFinalize flushes the communicator's operations and, for a
// nonblocking one, starts its teardown (poll [CommGetAsyncError] until it
// is no longer in progress), so that [CommDestroy] then frees it without
// blocking. It calls ncclCommFinalize.
func CommFinalize(c Comm) error {
	return call("ncclCommFinalize", func() Result { return ncclCommFinalize(c) })
}

// CommDestroy frees the communicator once its operations are done. It
// calls ncclCommDestroy. c must not be used afterwards.
func CommDestroy(c Comm) error {
	return call("ncclCommDestroy", func() Result { return ncclCommDestroy(c) })
}

// CommAbort stops the communicator's operations that may still be running
// on the device (kernels waiting for a peer that will not come return) and
// frees it. It calls ncclCommAbort. c must not be used afterwards.
func CommAbort(c Comm) error {
	return call("ncclCommAbort", func() Result { return ncclCommAbort(c) })
}

// CommGetAsyncError returns the communicator's state: [Success],
// ncclInProgress while a nonblocking call has not finished, or the error
// that an asynchronous operation met (a peer's failure is
// ncclRemoteError); [Result.Err] turns it into an error. err is the
// call's own failure. It calls ncclCommGetAsyncError; it is safe to call
// from another thread than the one issuing the communicator's operations.
func CommGetAsyncError(c Comm) (state Result, err error) {
	err = call("ncclCommGetAsyncError", func() Result { return ncclCommGetAsyncError(c, &state) })
	return state, err
}

// CommCount returns the number of ranks of the communicator. It calls
// ncclCommCount.
func CommCount(c Comm) (int, error) {
	var n int32
	err := call("ncclCommCount", func() Result { return ncclCommCount(c, &n) })
	return int(n), err
}

// CommCuDevice returns the CUDA device ordinal of the communicator. It
// calls ncclCommCuDevice.
func CommCuDevice(c Comm) (int, error) {
	var d int32
	err := call("ncclCommCuDevice", func() Result { return ncclCommCuDevice(c, &d) })
	return int(d), err
}

// CommUserRank returns the communicator's rank. It calls ncclCommUserRank.
func CommUserRank(c Comm) (int, error) {
	var r int32
	err := call("ncclCommUserRank", func() Result { return ncclCommUserRank(c, &r) })
	return int(r), err
}

// GetErrorString returns NCCL's text for a result. It calls
// ncclGetErrorString; it returns "" before [Load].
func GetErrorString(r Result) string {
	if !lib.Ready() {
		return ""
	}
	return goString(ncclGetErrorString(r))
}

// GetLastError returns NCCL's message for the last error it met ("" when
// none, and before [Load]). It calls ncclGetLastError, which ignores c
// (it may be 0). The message stays until the next error, so it may belong
// to an earlier failure than the one at hand.
func GetLastError(c Comm) string {
	if !lib.Ready() {
		return ""
	}
	return goString(ncclGetLastError(c))
}

// AllReduce queues on stream s the reduction with op of count elements of
// type dt from every rank's send into every rank's recv (send == recv
// works in place). It calls ncclAllReduce through purego.SyscallN. The
// call returns once the operation is queued; the stream runs it.
func AllReduce(send, recv cuda.DevicePtr, count uint64, dt DataType, op RedOp, c Comm, s cuda.Stream) error {
	return call("ncclAllReduce", func() Result {
		return result(purego.SyscallN(addrAllReduce, uintptr(send), uintptr(recv), uintptr(count), uintptr(dt),
			uintptr(op), uintptr(c), uintptr(s)))
	})
}

// Broadcast queues on stream s the copy of count elements from root's send
// into every rank's recv (send == recv works in place; send is read on
// root only). It calls ncclBroadcast through purego.SyscallN.
func Broadcast(send, recv cuda.DevicePtr, count uint64, dt DataType, root int, c Comm, s cuda.Stream) error {
	return call("ncclBroadcast", func() Result {
		return result(purego.SyscallN(addrBroadcast, uintptr(send), uintptr(recv), uintptr(count), uintptr(dt),
			uintptr(int32(root)), uintptr(c), uintptr(s)))
	})
}

// Reduce queues on stream s the reduction with op of every rank's send
// into root's recv (recv is written on root only; send == recv works in
// place). It calls ncclReduce through purego.SyscallN.
func Reduce(send, recv cuda.DevicePtr, count uint64, dt DataType, op RedOp, root int, c Comm, s cuda.Stream) error {
	return call("ncclReduce", func() Result {
		return result(purego.SyscallN(addrReduce, uintptr(send), uintptr(recv), uintptr(count), uintptr(dt),
			uintptr(op), uintptr(int32(root)), uintptr(c), uintptr(s)))
	})
}

// AllGather queues on stream s the gathering of sendCount elements from
// every rank into every rank's recv, rank r's at element r·sendCount (recv
// holds nranks·sendCount). It calls ncclAllGather through purego.SyscallN.
func AllGather(send, recv cuda.DevicePtr, sendCount uint64, dt DataType, c Comm, s cuda.Stream) error {
	return call("ncclAllGather", func() Result {
		return result(purego.SyscallN(addrAllGather, uintptr(send), uintptr(recv), uintptr(sendCount), uintptr(dt),
			uintptr(c), uintptr(s)))
	})
}

// ReduceScatter queues on stream s the reduction with op of every rank's
// send (nranks·recvCount elements) and leaves block r of the result in
// rank r's recv. It calls ncclReduceScatter through purego.SyscallN.
func ReduceScatter(send, recv cuda.DevicePtr, recvCount uint64, dt DataType, op RedOp, c Comm, s cuda.Stream) error {
	return call("ncclReduceScatter", func() Result {
		return result(purego.SyscallN(addrReduceScatter, uintptr(send), uintptr(recv), uintptr(recvCount), uintptr(dt),
			uintptr(op), uintptr(c), uintptr(s)))
	})
}

// Send queues on stream s the sending of count elements at send to rank
// peer, which calls [Recv]. It calls ncclSend through purego.SyscallN. A
// send and its receive issued by one thread (a rank sending to itself, or
// two communicators of one thread) must be inside one
// [GroupStart]/[GroupEnd]; NCCL reports an unmatched send to self as
// [ErrInvalidUsage] at the group's end.
func Send(send cuda.DevicePtr, count uint64, dt DataType, peer int, c Comm, s cuda.Stream) error {
	return call("ncclSend", func() Result {
		return result(purego.SyscallN(addrSend, uintptr(send), uintptr(count), uintptr(dt), uintptr(int32(peer)),
			uintptr(c), uintptr(s)))
	})
}

// Recv queues on stream s the receiving of count elements from rank peer
// into recv. It calls ncclRecv through purego.SyscallN.
func Recv(recv cuda.DevicePtr, count uint64, dt DataType, peer int, c Comm, s cuda.Stream) error {
	return call("ncclRecv", func() Result {
		return result(purego.SyscallN(addrRecv, uintptr(recv), uintptr(count), uintptr(dt), uintptr(int32(peer)),
			uintptr(c), uintptr(s)))
	})
}

// GroupStart opens a group: the calls that follow, on this OS thread, are
// queued and launched together by the matching [GroupEnd]. Groups nest
// (only the outermost end launches). It calls ncclGroupStart through
// purego.SyscallN. The group's state belongs to the calling thread: lock
// the goroutine to its thread from GroupStart to GroupEnd.
func GroupStart() error {
	return call("ncclGroupStart", func() Result { return result(purego.SyscallN(addrGroupStart)) })
}

// GroupEnd closes the group opened by [GroupStart] and, when it is the
// outermost, launches its calls; errors of the grouped calls (such as an
// unmatched send to self) surface here. It calls ncclGroupEnd through
// purego.SyscallN.
func GroupEnd() error {
	return call("ncclGroupEnd", func() Result { return result(purego.SyscallN(addrGroupEnd)) })
}
