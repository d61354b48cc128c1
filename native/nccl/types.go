package nccl

import (
	"fmt"
	"strconv"
)

// Comm is an NCCL communicator (ncclComm_t): one rank's handle on a group
// of ranks. It is an opaque pointer owned by NCCL; [CommDestroy] or
// [CommAbort] frees it, after which it must not be used.
type Comm uintptr

// UniqueIDBytes is NCCL_UNIQUE_ID_BYTES, the size of a [UniqueID].
const UniqueIDBytes = 128

// UniqueID is an ncclUniqueId: the 128 bytes that [GetUniqueID] makes on
// one rank and every rank of a communicator passes to [CommInitRank]. It
// holds the root's address, so it travels between processes as plain
// bytes (through a store, a file or a socket).
type UniqueID [UniqueIDBytes]byte

// uniqueIDArg is ncclUniqueId as C passes it by value: a struct of 128
// chars, which the System V ABI copies onto the stack. purego passes a Go
// struct of the same layout the same way; it does not pass arrays.
type uniqueIDArg struct {
	internal [UniqueIDBytes]byte
}

// DataType is an ncclDataType_t, the element type of a collective's
// buffers.
type DataType int32

// The element types, with nccl.h's values.
const (
	Int8       DataType = 0  // ncclInt8 (ncclChar)
	Uint8      DataType = 1  // ncclUint8
	Int32      DataType = 2  // ncclInt32 (ncclInt)
	Uint32     DataType = 3  // ncclUint32
	Int64      DataType = 4  // ncclInt64
	Uint64     DataType = 5  // ncclUint64
	Float16    DataType = 6  // ncclFloat16 (ncclHalf)
	Float32    DataType = 7  // ncclFloat32 (ncclFloat)
	Float64    DataType = 8  // ncclFloat64 (ncclDouble)
	BFloat16   DataType = 9  // ncclBfloat16 (NCCL 2.10 built with CUDA 11 or later)
	Float8E4M3 DataType = 10 // ncclFloat8e4m3 (NCCL 2.24 and later)
	Float8E5M2 DataType = 11 // ncclFloat8e5m2 (NCCL 2.24 and later)
)

var dataTypes = [...]struct {
	name string
	size int
}{
	Int8: {"ncclInt8", 1}, Uint8: {"ncclUint8", 1}, Int32: {"ncclInt32", 4}, Uint32: {"ncclUint32", 4},
	Int64: {"ncclInt64", 8}, Uint64: {"ncclUint64", 8}, Float16: {"ncclFloat16", 2}, Float32: {"ncclFloat32", 4},
	Float64: {"ncclFloat64", 8}, BFloat16: {"ncclBfloat16", 2}, Float8E4M3: {"ncclFloat8e4m3", 1},
	Float8E5M2: {"ncclFloat8e5m2", 1},
}

// String returns the type's name in nccl.h, e.g. "ncclFloat32".
func (t DataType) String() string {
	if t >= 0 && int(t) < len(dataTypes) {
		return dataTypes[t].name
	}
	return "ncclDataType(" + strconv.Itoa(int(t)) + ")"
}

// Size returns the size of one element in bytes, 0 for an unknown type.
func (t DataType) Size() int {
	if t >= 0 && int(t) < len(dataTypes) {
		return dataTypes[t].size
	}
	return 0
}

// RedOp is an ncclRedOp_t, how a reduction combines the ranks' values.
type RedOp int32

// The built-in reductions, with nccl.h's values.
const (
	Sum  RedOp = 0 // ncclSum
	Prod RedOp = 1 // ncclProd
	Max  RedOp = 2 // ncclMax
	Min  RedOp = 3 // ncclMin
	Avg  RedOp = 4 // ncclAvg: the sum divided by the number of ranks (NCCL 2.10 and later)
)

var redOpNames = [...]string{Sum: "ncclSum", Prod: "ncclProd", Max: "ncclMax", Min: "ncclMin", Avg: "ncclAvg"}

// String returns the reduction's name in nccl.h, e.g. "ncclSum".
func (op RedOp) String() string {
	if op >= 0 && int(op) < len(redOpNames) {
		return redOpNames[op]
	}
	return "ncclRedOp(" + strconv.Itoa(int(op)) + ")"
}

// Config is the part of ncclConfig_t that these bindings set, for
// [CommInitRankConfig]; every other attribute keeps NCCL's default.
type Config struct {
	// Blocking false makes the communicator nonblocking: its calls may
	// return [ErrInProgress], and the caller then polls
	// [CommGetAsyncError] until the state is no longer ncclInProgress
	// before the next call. Each collective of a nonblocking communicator
	// completes on a thread NCCL starts for it, which costs tens of
	// microseconds; blocking communicators are the fast path.
	Blocking bool
}

// configArg is ncclConfig_t as NCCL 2.14 laid it out: size, magic,
// version and blocking. NCCL reads the size and the version first and
// gives every attribute that came later its default, so this prefix is a
// valid configuration for every NCCL from 2.14 on.
type configArg struct {
	size     uint64 // sizeof the struct handed over
	magic    uint32 // NCCL_API_MAGIC
	version  uint32 // the NCCL_VERSION_CODE the layout is from
	blocking int32
	_        int32 // padding to 8 bytes, as in C
}

const (
	apiMagic      = 0xcafebeef // NCCL_API_MAGIC
	configVersion = 21400      // NCCL_VERSION(2, 14, 0)
)

func (c Config) arg() configArg {
	a := configArg{magic: apiMagic, version: configVersion}
	a.size = uint64(sizeofConfigArg)
	if c.Blocking {
		a.blocking = 1
	}
	return a
}

// VersionCode returns NCCL_VERSION(major, minor, patch): the code that
// [GetVersion] returns for that release (22803 for 2.28.3, 2708 for 2.7.8).
func VersionCode(major, minor, patch int) int {
	if major <= 2 && minor <= 8 {
		return major*1000 + minor*100 + patch
	}
	return major*10000 + minor*100 + patch
}

// VersionString writes a version code as "major.minor.patch" ("2.28.3").
func VersionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code/100%100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code/100%10, code%100)
}
