package nccl

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/vramgo/vram/native/internal/bindtest"
)

// TestBindingTable holds every Go declaration and struct to bindings.tsv.
func TestBindingTable(t *testing.T) {
	bindtest.Table(t, bindings, map[string]uintptr{
		"ncclUniqueId":      unsafe.Sizeof(uniqueIDArg{}),
		"ncclConfig_v21400": unsafe.Sizeof(configArg{}),
	})
}

// TestSymbolsNamed checks that every wrapper reports the C symbol of the
// binding it calls.
func TestSymbolsNamed(t *testing.T) {
	bindtest.Uses(t, bindings, map[string]string{"call": libName}, "call", "check", "GetErrorString", "GetLastError")
}

// TestNotLoaded checks that every wrapper fails with ErrNotLoaded, instead
// of calling through a nil function or address, before Load.
func TestNotLoaded(t *testing.T) {
	if lib.Ready() {
		t.Skip("the library is loaded")
	}
	bindtest.NotLoaded(t, ErrNotLoaded, []any{
		GetVersion, GetUniqueID, CommInitRank, CommInitRankConfig, CommInitAll, CommFinalize,
		CommDestroy, CommAbort, CommGetAsyncError, CommCount, CommCuDevice, CommUserRank,
		AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv, GroupStart, GroupEnd,
	}, "Load")
	if _, err := CommInitAll([]int{0, 1}); !errors.Is(err, ErrNotLoaded) {
		t.Errorf("CommInitAll: %v", err)
	}
	if s := GetErrorString(4); s != "" {
		t.Errorf("GetErrorString before Load: %q", s)
	}
	if s := GetLastError(0); s != "" {
		t.Errorf("GetLastError before Load: %q", s)
	}
	if Resolved() != nil {
		t.Error("Resolved before Load is not nil")
	}
}

func TestErrors(t *testing.T) {
	// NCCL has no "unknown" code: a code outside the table matches no
	// sentinel, which a code NCCL never returns stands for here.
	none := sentinel(-1)
	bindtest.Errors[Result, *Error](t, "nccl", check, Success, none, false, []bindtest.ErrorCase[Result]{
		{Code: 1, Name: "ncclUnhandledCudaError", Sentinel: ErrUnhandledCudaError},
		{Code: 2, Name: "ncclSystemError", Sentinel: ErrSystemError},
		{Code: 3, Name: "ncclInternalError", Sentinel: ErrInternalError},
		{Code: 4, Name: "ncclInvalidArgument", Sentinel: ErrInvalidArgument},
		{Code: 5, Name: "ncclInvalidUsage", Sentinel: ErrInvalidUsage},
		{Code: 6, Name: "ncclRemoteError", Sentinel: ErrRemoteError},
		{Code: 7, Name: "ncclInProgress", Sentinel: ErrInProgress},
		{Code: 8, Name: "ncclTimeout", Sentinel: ErrTimeout},
		{Code: 42, Name: "ncclResult_42"},
	})
	if err := Success.Err(); err != nil {
		t.Errorf("Success.Err() = %v", err)
	}
	err := Result(6).Err()
	var e6 *Error
	if !errors.Is(err, ErrRemoteError) || !errors.As(err, &e6) || e6.Func != "" {
		t.Errorf("Result(6).Err() = %#v", err)
	}
	if !lib.Ready() && err.Error() != "nccl: ncclRemoteError (6)" {
		t.Errorf("Result(6).Err() says %q", err)
	}
	e := &Error{Code: 5, Name: "ncclInvalidUsage", Func: "ncclGroupEnd", Desc: "invalid usage", Last: "Trying to send to self without a matching recv"}
	if got, want := e.Error(), "nccl: ncclGroupEnd: ncclInvalidUsage (5): invalid usage; last NCCL error: Trying to send to self without a matching recv"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestResultNamesUnique guards the checked-in table against copy slips.
func TestResultNamesUnique(t *testing.T) {
	bindtest.Names(t, resultNames, "nccl")
	for r := Result(0); r <= 8; r++ {
		if _, ok := resultNames[r]; !ok {
			t.Errorf("result %d has no name", r)
		}
	}
}

func TestDataTypes(t *testing.T) {
	tests := []struct {
		dt   DataType
		name string
		size int
	}{
		{Int8, "ncclInt8", 1}, {Uint8, "ncclUint8", 1}, {Int32, "ncclInt32", 4}, {Uint32, "ncclUint32", 4},
		{Int64, "ncclInt64", 8}, {Uint64, "ncclUint64", 8}, {Float16, "ncclFloat16", 2},
		{Float32, "ncclFloat32", 4}, {Float64, "ncclFloat64", 8}, {BFloat16, "ncclBfloat16", 2},
		{Float8E4M3, "ncclFloat8e4m3", 1}, {Float8E5M2, "ncclFloat8e5m2", 1},
		{12, "ncclDataType(12)", 0}, {-1, "ncclDataType(-1)", 0},
	}
	for i, tc := range tests {
		if i < 12 && int(tc.dt) != i {
			t.Errorf("%s = %d, nccl.h says %d", tc.name, tc.dt, i)
		}
		if tc.dt.String() != tc.name || tc.dt.Size() != tc.size {
			t.Errorf("%d: %q size %d, want %q size %d", tc.dt, tc.dt, tc.dt.Size(), tc.name, tc.size)
		}
	}
}

func TestRedOps(t *testing.T) {
	for i, name := range []string{"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"} {
		if got := RedOp(i).String(); got != name {
			t.Errorf("RedOp(%d) = %q, want %q", i, got, name)
		}
	}
	if Sum != 0 || Prod != 1 || Max != 2 || Min != 3 || Avg != 4 {
		t.Error("reduction values differ from nccl.h")
	}
	if got := RedOp(5).String(); got != "ncclRedOp(5)" {
		t.Errorf("%q", got)
	}
}

// TestUniqueIDByValue checks the layout that purego copies onto the stack
// for ncclCommInitRank: the 128 bytes of the id, in order, and nothing
// else.
func TestUniqueIDByValue(t *testing.T) {
	var id UniqueID
	for i := range id {
		id[i] = byte(i*7 + 1)
	}
	arg := uniqueIDArg{internal: id}
	if unsafe.Sizeof(arg) != UniqueIDBytes || unsafe.Alignof(arg) != 1 {
		t.Fatalf("size %d, alignment %d", unsafe.Sizeof(arg), unsafe.Alignof(arg))
	}
	got := unsafe.Slice((*byte)(unsafe.Pointer(&arg)), UniqueIDBytes)
	for i := range got {
		if got[i] != id[i] {
			t.Fatalf("byte %d is %d, want %d", i, got[i], id[i])
		}
	}
}

// TestConfigLayout checks the ncclConfig_t prefix against nccl.h's layout
// and the values that NCCL_CONFIG_INITIALIZER would give it.
func TestConfigLayout(t *testing.T) {
	var a configArg
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"size", unsafe.Offsetof(a.size), 0},
		{"magic", unsafe.Offsetof(a.magic), 8},
		{"version", unsafe.Offsetof(a.version), 12},
		{"blocking", unsafe.Offsetof(a.blocking), 16},
		{"sizeof", unsafe.Sizeof(a), 24},
	} {
		if tc.got != tc.want {
			t.Errorf("%s at %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	for _, blocking := range []bool{false, true} {
		a := Config{Blocking: blocking}.arg()
		want := int32(0)
		if blocking {
			want = 1
		}
		if a.size != 24 || a.magic != 0xcafebeef || a.version != 21400 || a.blocking != want {
			t.Errorf("Config{Blocking: %v} gives %+v", blocking, a)
		}
	}
}

func TestVersion(t *testing.T) {
	tests := []struct {
		major, minor, patch int
		code                int
		s                   string
	}{
		{2, 28, 3, 22803, "2.28.3"},
		{2, 14, 3, 21403, "2.14.3"},
		{2, 30, 7, 23007, "2.30.7"},
		{2, 7, 8, 2708, "2.7.8"},
		{2, 8, 4, 2804, "2.8.4"},
		{2, 9, 6, 20906, "2.9.6"},
	}
	for _, tc := range tests {
		if got := VersionCode(tc.major, tc.minor, tc.patch); got != tc.code {
			t.Errorf("VersionCode(%d, %d, %d) = %d, want %d", tc.major, tc.minor, tc.patch, got, tc.code)
		}
		if got := VersionString(tc.code); got != tc.s {
			t.Errorf("VersionString(%d) = %q, want %q", tc.code, got, tc.s)
		}
	}
}
