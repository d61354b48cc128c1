package cudnn

// The enums of cuDNN 9's backend (graph) API, from cudnn_graph.h. Each
// constant's line comment names its C enumerator; TestGraphEnums holds
// every one to testdata/cudnn_graph_enums.tsv, the values as cuDNN
// 9.6.0's cudnn_graph.h defines them (the enums of that header only grow
// within cuDNN 9: values are never renumbered). A wrong value would be
// silently misread by cuDNN, so this file keeps to the values it names
// and nothing else.

// DescriptorType is a cudnnBackendDescriptorType_t, the kind of a
// [BackendDescriptor].
type DescriptorType int32

// Descriptor types (cudnnBackendDescriptorType_t; the C enum numbers them
// implicitly from 0).
const (
	DescPointwise                     DescriptorType = 0  // CUDNN_BACKEND_POINTWISE_DESCRIPTOR
	DescConvolution                   DescriptorType = 1  // CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR
	DescEngine                        DescriptorType = 2  // CUDNN_BACKEND_ENGINE_DESCRIPTOR
	DescEngineConfig                  DescriptorType = 3  // CUDNN_BACKEND_ENGINECFG_DESCRIPTOR
	DescEngineHeuristics              DescriptorType = 4  // CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR
	DescExecutionPlan                 DescriptorType = 5  // CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR
	DescIntermediateInfo              DescriptorType = 6  // CUDNN_BACKEND_INTERMEDIATE_INFO_DESCRIPTOR
	DescKnobChoice                    DescriptorType = 7  // CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR
	DescKnobInfo                      DescriptorType = 8  // CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR
	DescLayoutInfo                    DescriptorType = 9  // CUDNN_BACKEND_LAYOUT_INFO_DESCRIPTOR
	DescOperationConvolutionForward   DescriptorType = 10 // CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
	DescOperationConvolutionBwdFilter DescriptorType = 11 // CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR
	DescOperationConvolutionBwdData   DescriptorType = 12 // CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
	DescOperationPointwise            DescriptorType = 13 // CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR
	DescOperationGenStats             DescriptorType = 14 // CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR
	DescOperationGraph                DescriptorType = 15 // CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR
	DescVariantPack                   DescriptorType = 16 // CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR
	DescTensor                        DescriptorType = 17 // CUDNN_BACKEND_TENSOR_DESCRIPTOR
)

// AttrType is a cudnnBackendAttributeType_t: the C type of the elements
// of an attribute's array.
type AttrType int32

// Attribute types (cudnnBackendAttributeType_t; numbered implicitly from
// 0).
const (
	TypeHandle          AttrType = 0  // CUDNN_TYPE_HANDLE: cudnnHandle_t
	TypeDataType        AttrType = 1  // CUDNN_TYPE_DATA_TYPE: cudnnDataType_t
	TypeBoolean         AttrType = 2  // CUDNN_TYPE_BOOLEAN: bool (1 byte)
	TypeInt64           AttrType = 3  // CUDNN_TYPE_INT64: int64_t
	TypeFloat           AttrType = 4  // CUDNN_TYPE_FLOAT: float
	TypeDouble          AttrType = 5  // CUDNN_TYPE_DOUBLE: double
	TypeVoidPtr         AttrType = 6  // CUDNN_TYPE_VOID_PTR: void*
	TypeConvolutionMode AttrType = 7  // CUDNN_TYPE_CONVOLUTION_MODE: cudnnConvolutionMode_t
	TypeHeurMode        AttrType = 8  // CUDNN_TYPE_HEUR_MODE: cudnnBackendHeurMode_t
	TypeKnobType        AttrType = 9  // CUDNN_TYPE_KNOB_TYPE
	TypeNanPropagation  AttrType = 10 // CUDNN_TYPE_NAN_PROPOGATION
	TypeNumericalNote   AttrType = 11 // CUDNN_TYPE_NUMERICAL_NOTE: cudnnBackendNumericalNote_t
	TypeLayoutType      AttrType = 12 // CUDNN_TYPE_LAYOUT_TYPE
	TypeAttribName      AttrType = 13 // CUDNN_TYPE_ATTRIB_NAME
	TypePointwiseMode   AttrType = 14 // CUDNN_TYPE_POINTWISE_MODE
	TypeBackendDesc     AttrType = 15 // CUDNN_TYPE_BACKEND_DESCRIPTOR: cudnnBackendDescriptor_t
	TypeInt32           AttrType = 23 // CUDNN_TYPE_INT32: int32_t
)

// AttrName is a cudnnBackendAttributeName_t.
type AttrName int32

// Attribute names (cudnnBackendAttributeName_t) of the descriptors that a
// convolution's graph uses.
const (
	AttrConvolutionCompType      AttrName = 100 // CUDNN_ATTR_CONVOLUTION_COMP_TYPE
	AttrConvolutionConvMode      AttrName = 101 // CUDNN_ATTR_CONVOLUTION_CONV_MODE
	AttrConvolutionDilations     AttrName = 102 // CUDNN_ATTR_CONVOLUTION_DILATIONS
	AttrConvolutionFilterStrides AttrName = 103 // CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES
	AttrConvolutionPostPaddings  AttrName = 104 // CUDNN_ATTR_CONVOLUTION_POST_PADDINGS
	AttrConvolutionPrePaddings   AttrName = 105 // CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS
	AttrConvolutionSpatialDims   AttrName = 106 // CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS

	AttrEngineHeurMode           AttrName = 200 // CUDNN_ATTR_ENGINEHEUR_MODE
	AttrEngineHeurOperationGraph AttrName = 201 // CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH
	AttrEngineHeurResults        AttrName = 202 // CUDNN_ATTR_ENGINEHEUR_RESULTS

	AttrEngineConfigEngine        AttrName = 300 // CUDNN_ATTR_ENGINECFG_ENGINE
	AttrEngineConfigKnobChoices   AttrName = 302 // CUDNN_ATTR_ENGINECFG_KNOB_CHOICES
	AttrEngineConfigWorkspaceSize AttrName = 303 // CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE

	AttrExecutionPlanHandle        AttrName = 400 // CUDNN_ATTR_EXECUTION_PLAN_HANDLE
	AttrExecutionPlanEngineConfig  AttrName = 401 // CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG
	AttrExecutionPlanWorkspaceSize AttrName = 402 // CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE

	AttrConvFwdAlpha       AttrName = 700 // CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA
	AttrConvFwdBeta        AttrName = 701 // CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA
	AttrConvFwdConvDesc    AttrName = 702 // CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC
	AttrConvFwdW           AttrName = 703 // CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W
	AttrConvFwdX           AttrName = 704 // CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X
	AttrConvFwdY           AttrName = 705 // CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y
	AttrConvBwdDataAlpha   AttrName = 706 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA
	AttrConvBwdDataBeta    AttrName = 707 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA
	AttrConvBwdDataConv    AttrName = 708 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC
	AttrConvBwdDataW       AttrName = 709 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W
	AttrConvBwdDataDX      AttrName = 710 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX
	AttrConvBwdDataDY      AttrName = 711 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY
	AttrConvBwdFilterAlpha AttrName = 712 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA
	AttrConvBwdFilterBeta  AttrName = 713 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA
	AttrConvBwdFilterConv  AttrName = 714 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC
	AttrConvBwdFilterDW    AttrName = 715 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW
	AttrConvBwdFilterX     AttrName = 716 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X
	AttrConvBwdFilterDY    AttrName = 717 // CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY

	AttrOperationGraphHandle            AttrName = 800 // CUDNN_ATTR_OPERATIONGRAPH_HANDLE
	AttrOperationGraphOps               AttrName = 801 // CUDNN_ATTR_OPERATIONGRAPH_OPS
	AttrOperationGraphEngineGlobalCount AttrName = 802 // CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT

	AttrTensorByteAlignment AttrName = 900 // CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT
	AttrTensorDataType      AttrName = 901 // CUDNN_ATTR_TENSOR_DATA_TYPE
	AttrTensorDimensions    AttrName = 902 // CUDNN_ATTR_TENSOR_DIMENSIONS
	AttrTensorStrides       AttrName = 903 // CUDNN_ATTR_TENSOR_STRIDES
	AttrTensorUniqueID      AttrName = 906 // CUDNN_ATTR_TENSOR_UNIQUE_ID
	AttrTensorIsVirtual     AttrName = 907 // CUDNN_ATTR_TENSOR_IS_VIRTUAL

	AttrVariantPackUniqueIDs    AttrName = 1000 // CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS
	AttrVariantPackDataPointers AttrName = 1001 // CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS
	AttrVariantPackWorkspace    AttrName = 1003 // CUDNN_ATTR_VARIANT_PACK_WORKSPACE

	AttrEngineOperationGraph AttrName = 1300 // CUDNN_ATTR_ENGINE_OPERATION_GRAPH
	AttrEngineGlobalIndex    AttrName = 1301 // CUDNN_ATTR_ENGINE_GLOBAL_INDEX
	AttrEngineNumericalNote  AttrName = 1303 // CUDNN_ATTR_ENGINE_NUMERICAL_NOTE
	AttrEngineBehaviorNote   AttrName = 1305 // CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE
)

// HeurMode is a cudnnBackendHeurMode_t, the heuristics that rank a
// graph's engine configurations.
type HeurMode int32

// Heuristic modes (cudnnBackendHeurMode_t).
const (
	HeurModeInstant  HeurMode = 0 // CUDNN_HEUR_MODE_INSTANT
	HeurModeB        HeurMode = 1 // CUDNN_HEUR_MODE_B
	HeurModeFallback HeurMode = 2 // CUDNN_HEUR_MODE_FALLBACK
	HeurModeA        HeurMode = 3 // CUDNN_HEUR_MODE_A
)

// NumericalNote is a cudnnBackendNumericalNote_t, a property of an
// engine's arithmetic.
type NumericalNote int32

// Numerical notes (cudnnBackendNumericalNote_t; numbered implicitly from
// 0).
const (
	NoteTensorCore                NumericalNote = 0  // CUDNN_NUMERICAL_NOTE_TENSOR_CORE
	NoteDownConvertInputs         NumericalNote = 1  // CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS
	NoteReducedPrecisionReduction NumericalNote = 2  // CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION
	NoteFFT                       NumericalNote = 3  // CUDNN_NUMERICAL_NOTE_FFT
	NoteNonDeterministic          NumericalNote = 4  // CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
	NoteWinograd                  NumericalNote = 5  // CUDNN_NUMERICAL_NOTE_WINOGRAD
	NoteWinogradTile4x4           NumericalNote = 6  // CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4
	NoteWinogradTile6x6           NumericalNote = 7  // CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6
	NoteWinogradTile13x13         NumericalNote = 8  // CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13
	NoteStrictNaNProp             NumericalNote = 9  // CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP
	NumericalNoteCount            NumericalNote = 10 // CUDNN_NUMERICAL_NOTE_TYPE_COUNT
)
