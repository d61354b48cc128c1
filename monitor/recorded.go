package monitor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vramgo/vram/memory"
)

// RecordingFormat is the "format" key of a file of recorded readings.
const RecordingFormat = "vram-monitor-recording"

// RecordingVersion is the version of that format that this package writes.
const RecordingVersion = 1

// Recorded is a [Source] that plays back readings recorded earlier (or
// made up for a test): each Read returns the next one, starting again from
// the first after the last. The readings keep their recorded times. It is
// safe for concurrent use.
type Recorded struct {
	mu       sync.Mutex
	readings []Reading
	next     int
	closed   bool
}

var _ Source = (*Recorded)(nil)

// NewRecorded returns a source that plays back readings, which it keeps
// (the caller must not change them afterwards). With no readings, Read
// fails with [ErrNoGPU].
func NewRecorded(readings []Reading) *Recorded {
	return &Recorded{readings: readings}
}

// OpenRecorded reads a file of readings (see [ReadRecording]) and returns a
// source that plays them back. Errors name the file.
func OpenRecorded(path string) (*Recorded, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	defer f.Close()
	rs, err := ReadRecording(f)
	if err != nil {
		return nil, fmt.Errorf("monitor: %s: %w", path, err)
	}
	return NewRecorded(rs), nil
}

// Read returns the next recorded reading, deep-copied so the caller may
// change it. A nil *Recorded returns an error, as Close does.
func (r *Recorded) Read() (Reading, error) {
	if r == nil {
		return Reading{}, errNil("source")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return Reading{}, ErrClosed
	}
	if len(r.readings) == 0 {
		return Reading{}, fmt.Errorf("monitor: %w: the recording is empty", ErrNoGPU)
	}
	rd := r.readings[r.next]
	r.next = (r.next + 1) % len(r.readings)
	return cloneReading(rd), nil
}

// Close makes later Reads fail with [ErrClosed].
func (r *Recorded) Close() error {
	if r == nil {
		return errNil("source")
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return nil
}

// cloneReading copies r and every slice it holds.
func cloneReading(r Reading) Reading {
	gs := make([]GPU, len(r.GPUs))
	for i, g := range r.GPUs {
		g.Processes = append([]memory.ProcessMemory{}, g.Processes...)
		g.Errors = append([]string(nil), g.Errors...)
		gs[i] = g
	}
	r.GPUs = gs
	return r
}

// recording is the file layout of [WriteRecording].
type recording struct {
	Format   string    `json:"format"`
	Version  int       `json:"version"`
	Readings []Reading `json:"readings"`
}

// WriteRecording writes readings as a JSON recording:
//
//	{"format": "vram-monitor-recording", "version": 1, "readings": [READING, ...]}
//
// where each READING is a [Reading] as "vram smi --json" prints it.
func WriteRecording(w io.Writer, readings []Reading) error {
	if w == nil {
		return errNil("writer")
	}
	if readings == nil {
		readings = []Reading{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(recording{Format: RecordingFormat, Version: RecordingVersion, Readings: readings})
}

// maxRecordingBytes is the largest recording ReadRecording reads: a day of
// readings of 8 GPUs once a second is about 400 MiB. It bounds the memory
// an endless input (a device file, a pipe) can take.
var maxRecordingBytes int64 = 1 << 30

// ErrInvalidRecording is wrapped by the errors of [ReadRecording] and
// [OpenRecorded] for input that is not a recording of readings, or whose
// readings cannot be from a machine; test with errors.Is.
var ErrInvalidRecording = errors.New("invalid recording")

// invalid returns an error wrapping ErrInvalidRecording.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRecording}, args...)...)
}

// ReadRecording reads readings written by [WriteRecording]. It also
// accepts a single [Reading] (what "vram smi --json" prints) and a JSON
// array of readings. A file of another format or version, whose readings
// have no GPUs key, or whose readings cannot be from a machine (two GPUs
// with one index or UUID, a negative amount other than [Unknown], a
// percentage over 100, a process id below 1) is an error wrapping
// [ErrInvalidRecording]; nothing is returned then, and so is a key that
// no reading has (a misspelt one would lose its value). A number a reading
// leaves out, a process's used_bytes included, is [Unknown]. Input larger
// than 1 GiB is refused.
func ReadRecording(r io.Reader) ([]Reading, error) {
	if r == nil {
		return nil, errNil("reader")
	}
	// Look at the first byte before reading everything: input that is
	// not JSON (a binary file, /dev/zero) is refused at once.
	lr := &io.LimitedReader{R: r, N: maxRecordingBytes + 1}
	br := bufio.NewReader(lr)
	for {
		b, err := br.Peek(1)
		if err == io.EOF && lr.N == 0 {
			return nil, invalid("larger than %d bytes", maxRecordingBytes)
		}
		if err == io.EOF {
			return nil, invalid("empty input: not a recording of readings")
		}
		if err != nil {
			return nil, err
		}
		if c := b[0]; c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			br.ReadByte()
			continue
		} else if c != '{' && c != '[' {
			return nil, invalid("not JSON readings: it starts with %s", quoteByte(c))
		}
		break
	}
	data, err := io.ReadAll(br)
	if err != nil {
		return nil, err
	}
	if lr.N == 0 {
		return nil, invalid("larger than %d bytes", maxRecordingBytes)
	}
	data = bytes.TrimSpace(data)
	if data[0] == '[' {
		var rs []readingJSON
		if err := strictUnmarshal(data, &rs); err != nil {
			return nil, invalid("not a list of readings: %w", decodeError(err))
		}
		return checkReadings(fromJSON(rs))
	}
	var probe struct {
		Format  *string          `json:"format"`
		Version int              `json:"version"`
		GPUs    *json.RawMessage `json:"gpus"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, invalid("not JSON readings: %w", err)
	}
	switch {
	case probe.Format != nil:
		if *probe.Format != RecordingFormat {
			return nil, invalid("format %q, want %q", *probe.Format, RecordingFormat)
		}
		if probe.Version != RecordingVersion {
			return nil, invalid("version %d of %s; this vram reads version %d", probe.Version, RecordingFormat, RecordingVersion)
		}
		var rec struct {
			Format   string        `json:"format"`
			Version  int           `json:"version"`
			Readings []readingJSON `json:"readings"`
		}
		if err := strictUnmarshal(data, &rec); err != nil {
			return nil, invalid("%w", decodeError(err))
		}
		return checkReadings(fromJSON(rec.Readings))
	case probe.GPUs != nil:
		var rd readingJSON
		if err := strictUnmarshal(data, &rd); err != nil {
			return nil, invalid("%w", decodeError(err))
		}
		return checkReadings(fromJSON([]readingJSON{rd}))
	}
	return nil, invalid(`not a recording of readings: no "format" or "gpus" key`)
}

// quoteByte quotes b as a Go character literal: 'x', '\x00', and '\xbf'
// for a byte above ASCII, which is no character on its own (%q would
// print it as the Latin-1 one, '¿').
func quoteByte(b byte) string {
	if b >= utf8.RuneSelf {
		return fmt.Sprintf(`'\x%02x'`, b)
	}
	return strconv.QuoteRune(rune(b))
}

// strictUnmarshal decodes data into v, rejecting keys that v has no field
// for and anything after the value. A misspelt key ("bytes" for
// "used_bytes") would otherwise be dropped, and its value read as 0.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// decodeError returns err, an error of strictUnmarshal, with a message in
// the terms of the recording where encoding/json's speaks of Go's: a value
// of the wrong kind is named by its key's path in the recording
// ("gpus.temperature_c: a string, want a whole number"), a time that is
// not RFC 3339 by its value. The error returned wraps err.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		var path []string
		for _, k := range strings.Split(te.Field, ".") {
			if k != "" && k != "plain" { // gpuJSON's and processJSON's decoding type
				path = append(path, k)
			}
		}
		msg := jsonKind(te.Value) + ", want " + goKind(te.Type)
		if len(path) > 0 {
			msg = strings.Join(path, ".") + ": " + msg
		}
		return &reasonError{msg: msg, err: err}
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return &reasonError{msg: fmt.Sprintf("time %q: want a time as RFC 3339 writes it, such as 2026-11-30T17:00:00Z", pe.Value), err: err}
	}
	return err
}

// jsonKind describes the JSON value that encoding/json names kind
// ("string", "number", "number 1.5", ...).
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "bool":
		return "true or false"
	}
	return kind
}

// goKind describes the JSON value that decodes into a t.
func goKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.String()
}

// reasonError is an error with a message of its own that wraps the error
// it describes.
type reasonError struct {
	msg string
	err error
}

func (e *reasonError) Error() string { return e.msg }
func (e *reasonError) Unwrap() error { return e.err }

// readingJSON decodes a [Reading] of a recording: its GPUs through
// gpuJSON.
type readingJSON struct {
	Reading
	GPUs []gpuJSON `json:"gpus"`
}

// fromJSON returns the readings rs decoded.
func fromJSON(rs []readingJSON) []Reading {
	out := make([]Reading, len(rs))
	for i, r := range rs {
		out[i] = r.Reading
		out[i].GPUs = make([]GPU, len(r.GPUs))
		for j, g := range r.GPUs {
			out[i].GPUs[j] = GPU(g)
		}
	}
	return out
}

// gpuJSON decodes a [GPU] of a recording. A number that the recording
// leaves out is [Unknown], as the driver not reporting it would make it,
// rather than a made-up 0 (0 MiB used, 0 °C), and so is a process's
// memory; a key that GPU has no field for is an error.
type gpuJSON GPU

// UnmarshalJSON decodes b onto a GPU whose numbers are all Unknown.
func (g *gpuJSON) UnmarshalJSON(b []byte) error {
	type plain GPU // GPU's fields without this method
	p := plain{
		Memory:       Memory{TotalBytes: Unknown, UsedBytes: Unknown, FreeBytes: Unknown, ReservedBytes: Unknown},
		Utilization:  Utilization{ComputePercent: Unknown, MemoryBandwidthPercent: Unknown},
		TemperatureC: Unknown,
		Power:        Power{DrawW: Unknown, LimitW: Unknown},
		Clocks:       Clocks{GraphicsMHz: Unknown, SMMHz: Unknown, MemoryMHz: Unknown, MaxSMMHz: Unknown},
	}
	v := struct {
		*plain
		Processes []processJSON `json:"processes"`
	}{plain: &p}
	if err := strictUnmarshal(b, &v); err != nil {
		return err
	}
	if v.Processes != nil {
		p.Processes = make([]memory.ProcessMemory, len(v.Processes))
		for i, pr := range v.Processes {
			p.Processes[i] = memory.ProcessMemory(pr)
		}
	}
	*g = gpuJSON(p)
	return nil
}

// processJSON decodes a process of a recording: memory it leaves out is
// Unknown.
type processJSON memory.ProcessMemory

// UnmarshalJSON decodes b onto a process whose memory is Unknown.
func (p *processJSON) UnmarshalJSON(b []byte) error {
	type plain memory.ProcessMemory
	v := plain{Bytes: Unknown}
	if err := strictUnmarshal(b, &v); err != nil {
		return err
	}
	*p = processJSON(v)
	return nil
}

// checkReadings returns rs, or an error for the first value that cannot be
// from a machine: NVML reports unsigned numbers, which vram's readings keep
// as they are or as Unknown, so anything below Unknown is made up, and
// the collector and the commands cannot show it truthfully.
func checkReadings(rs []Reading) ([]Reading, error) {
	for i, r := range rs {
		indices, uuids := map[int]bool{}, map[string]bool{}
		for j, g := range r.GPUs {
			if err := checkGPU(g); err != nil {
				return nil, invalid("reading %d, GPU %d: %w", i, j, err)
			}
			if indices[g.Index] {
				return nil, invalid("reading %d: two GPUs with index %d", i, g.Index)
			}
			indices[g.Index] = true
			if g.UUID != "" && uuids[g.UUID] {
				return nil, invalid("reading %d: two GPUs with UUID %q", i, g.UUID)
			}
			uuids[g.UUID] = true
		}
	}
	return rs, nil
}

// checkGPU returns an error for the first value of g that no device reports.
func checkGPU(g GPU) error {
	m := g.Memory
	switch {
	case g.Index < 0:
		return fmt.Errorf("negative index %d", g.Index)
	case m.TotalBytes < Unknown || m.UsedBytes < Unknown || m.FreeBytes < Unknown || m.ReservedBytes < Unknown:
		return errors.New("negative memory")
	case m.TotalBytes >= 0 && (m.UsedBytes > m.TotalBytes || m.FreeBytes > m.TotalBytes || m.ReservedBytes > m.TotalBytes):
		return fmt.Errorf("more memory used, free or reserved than the total of %d bytes", m.TotalBytes)
	case !percentOK(g.Utilization.ComputePercent) || !percentOK(g.Utilization.MemoryBandwidthPercent):
		return fmt.Errorf("utilization %d%%, %d%% not from 0 to 100", g.Utilization.ComputePercent, g.Utilization.MemoryBandwidthPercent)
	case g.TemperatureC < Unknown:
		return fmt.Errorf("temperature %d °C", g.TemperatureC)
	case g.Power.DrawW < 0 && g.Power.DrawW != Unknown || g.Power.LimitW < 0 && g.Power.LimitW != Unknown:
		return fmt.Errorf("negative power %g W, limit %g W", g.Power.DrawW, g.Power.LimitW)
	case min(g.Clocks.GraphicsMHz, g.Clocks.SMMHz, g.Clocks.MemoryMHz, g.Clocks.MaxSMMHz) < Unknown:
		return errors.New("negative clock")
	}
	for _, p := range g.Processes {
		switch {
		case p.PID < 1:
			return fmt.Errorf("process id %d", p.PID)
		case p.Bytes < Unknown:
			return fmt.Errorf("process %d: negative memory %d", p.PID, p.Bytes)
		}
	}
	return nil
}

func percentOK(v int) bool { return v == Unknown || v >= 0 && v <= 100 }
