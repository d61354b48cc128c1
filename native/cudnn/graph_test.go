package cudnn

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"strconv"
	"strings"
	"testing"
)

// headerEnums reads testdata/cudnn_graph_enums.tsv: the enumerators of
// cuDNN 9.6.0's cudnn_graph.h and their values.
func headerEnums(t *testing.T) map[string]int64 {
	t.Helper()
	f, err := os.Open("testdata/cudnn_graph_enums.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]int64{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, val, ok := strings.Cut(text, "\t")
		v, err := strconv.ParseInt(val, 10, 64)
		if !ok || err != nil {
			t.Fatalf("cudnn_graph_enums.tsv:%d: %q is not NAME<tab>VALUE", line, text)
		}
		if _, dup := want[name]; dup {
			t.Fatalf("cudnn_graph_enums.tsv:%d: %s twice", line, name)
		}
		want[name] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestGraphEnums type-checks graph_enums.go on its own and holds every
// constant whose line comment names a C enumerator to the header's value
// for it, so that a slip in a value, or a comment naming the wrong
// enumerator, fails here rather than misleading cuDNN.
func TestGraphEnums(t *testing.T) {
	want := headerEnums(t)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "graph_enums.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
	if _, err := (&types.Config{}).Check("cudnn", fset, []*ast.File{f}, info); err != nil {
		t.Fatalf("graph_enums.go does not type-check alone: %v", err)
	}
	checked := 0
	seen := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if vs.Comment == nil || len(vs.Names) != 1 {
				t.Errorf("%s: a constant without a line comment naming its C enumerator", fset.Position(vs.Pos()))
				continue
			}
			cname := strings.TrimRight(strings.Fields(vs.Comment.Text())[0], ":")
			goName := vs.Names[0].Name
			if other, dup := seen[cname]; dup {
				t.Errorf("%s and %s both name %s", goName, other, cname)
			}
			seen[cname] = goName
			hv, ok := want[cname]
			if !ok {
				t.Errorf("%s names %s, which the header table lacks", goName, cname)
				continue
			}
			c := info.Defs[vs.Names[0]].(*types.Const)
			got, exact := constantInt64(c)
			if !exact || got != hv {
				t.Errorf("%s = %v, but cudnn_graph.h has %s = %d", goName, c.Val(), cname, hv)
			}
			checked++
		}
	}
	if checked < 60 {
		t.Errorf("checked only %d constants", checked)
	}
	// The legacy enums that the graph's attributes reuse.
	for _, c := range []struct {
		name string
		got  int64
	}{
		{"CUDNN_DATA_FLOAT", int64(DataFloat)},
		{"CUDNN_DATA_HALF", int64(DataHalf)},
		{"CUDNN_DATA_BFLOAT16", int64(DataBFloat16)},
		{"CUDNN_CROSS_CORRELATION", int64(CrossCorrelation)},
	} {
		if c.got != want[c.name] {
			t.Errorf("%s is %d here, %d in cudnn_graph.h", c.name, c.got, want[c.name])
		}
	}
}

func constantInt64(c *types.Const) (int64, bool) {
	v, err := strconv.ParseInt(c.Val().ExactString(), 10, 64)
	return v, err == nil
}

// TestGraphEnumsImplicitOrder checks the implicitly numbered enums of the
// header table: consecutive from 0 in the header's order, so that a
// skipped or doubled line in the table shows.
func TestGraphEnumsImplicitOrder(t *testing.T) {
	want := headerEnums(t)
	for _, seq := range [][]string{
		{"CUDNN_BACKEND_POINTWISE_DESCRIPTOR", "CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR", "CUDNN_BACKEND_ENGINE_DESCRIPTOR",
			"CUDNN_BACKEND_ENGINECFG_DESCRIPTOR", "CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR", "CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR",
			"CUDNN_BACKEND_INTERMEDIATE_INFO_DESCRIPTOR", "CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR", "CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR",
			"CUDNN_BACKEND_LAYOUT_INFO_DESCRIPTOR", "CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR",
			"CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR", "CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR",
			"CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR", "CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR",
			"CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR", "CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR", "CUDNN_BACKEND_TENSOR_DESCRIPTOR"},
		{"CUDNN_TYPE_HANDLE", "CUDNN_TYPE_DATA_TYPE", "CUDNN_TYPE_BOOLEAN", "CUDNN_TYPE_INT64", "CUDNN_TYPE_FLOAT",
			"CUDNN_TYPE_DOUBLE", "CUDNN_TYPE_VOID_PTR", "CUDNN_TYPE_CONVOLUTION_MODE", "CUDNN_TYPE_HEUR_MODE",
			"CUDNN_TYPE_KNOB_TYPE", "CUDNN_TYPE_NAN_PROPOGATION", "CUDNN_TYPE_NUMERICAL_NOTE", "CUDNN_TYPE_LAYOUT_TYPE",
			"CUDNN_TYPE_ATTRIB_NAME", "CUDNN_TYPE_POINTWISE_MODE", "CUDNN_TYPE_BACKEND_DESCRIPTOR", "CUDNN_TYPE_GENSTATS_MODE",
			"CUDNN_TYPE_BN_FINALIZE_STATS_MODE", "CUDNN_TYPE_REDUCTION_OPERATOR_TYPE", "CUDNN_TYPE_BEHAVIOR_NOTE",
			"CUDNN_TYPE_TENSOR_REORDERING_MODE", "CUDNN_TYPE_RESAMPLE_MODE", "CUDNN_TYPE_PADDING_MODE", "CUDNN_TYPE_INT32"},
		{"CUDNN_NUMERICAL_NOTE_TENSOR_CORE", "CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS",
			"CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION", "CUDNN_NUMERICAL_NOTE_FFT", "CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC",
			"CUDNN_NUMERICAL_NOTE_WINOGRAD", "CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4", "CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6",
			"CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13", "CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP", "CUDNN_NUMERICAL_NOTE_TYPE_COUNT"},
	} {
		for i, name := range seq {
			if v, ok := want[name]; !ok || v != int64(i) {
				t.Errorf("%s: %d in the table (present %v), want %d (its place in the header)", name, v, ok, i)
			}
		}
	}
}

// TestGraphSetterChecks checks the argument checks of the raw attribute
// calls, which must not hand cuDNN a count without elements.
func TestGraphSetterChecks(t *testing.T) {
	if !lib.Ready() {
		t.Skip("needs the library to reach the argument check")
	}
	if err := BackendSetAttribute(0, AttrTensorDimensions, TypeInt64, 2, nil); err == nil {
		t.Error("a count of 2 without elements was passed on")
	}
	if _, err := BackendGetAttribute(0, AttrTensorDimensions, TypeInt64, -1, nil); err == nil {
		t.Error("a negative count was passed on")
	}
}
