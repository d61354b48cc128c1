package monitor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

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
// change it.
func (r *Recorded) Read() (Reading, error) {
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
	if readings == nil {
		readings = []Reading{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(recording{Format: RecordingFormat, Version: RecordingVersion, Readings: readings})
}

// ReadRecording reads readings written by [WriteRecording]. It also
// accepts a single [Reading] (what "vram smi --json" prints) and a JSON
// array of readings. A file of another format or version, or whose
// readings have no GPUs key, is an error.
func ReadRecording(r io.Reader) ([]Reading, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, errors.New("empty input: not a recording of readings")
	}
	if data[0] == '[' {
		var rs []Reading
		if err := strictUnmarshal(data, &rs); err != nil {
			return nil, fmt.Errorf("not a list of readings: %w", err)
		}
		return rs, checkReadings(rs)
	}
	var probe struct {
		Format  *string          `json:"format"`
		Version int              `json:"version"`
		GPUs    *json.RawMessage `json:"gpus"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("not JSON readings: %w", err)
	}
	switch {
	case probe.Format != nil:
		if *probe.Format != RecordingFormat {
			return nil, fmt.Errorf("format %q, want %q", *probe.Format, RecordingFormat)
		}
		if probe.Version != RecordingVersion {
			return nil, fmt.Errorf("version %d of %s; this vram reads version %d", probe.Version, RecordingFormat, RecordingVersion)
		}
		var rec recording
		if err := strictUnmarshal(data, &rec); err != nil {
			return nil, err
		}
		return rec.Readings, checkReadings(rec.Readings)
	case probe.GPUs != nil:
		var rd Reading
		if err := strictUnmarshal(data, &rd); err != nil {
			return nil, err
		}
		return []Reading{rd}, checkReadings([]Reading{rd})
	}
	return nil, errors.New(`not a recording of readings: no "format" or "gpus" key`)
}

// strictUnmarshal decodes data into v, rejecting anything after the value.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// checkReadings rejects readings that cannot be from a machine.
func checkReadings(rs []Reading) error {
	for i, r := range rs {
		for j, g := range r.GPUs {
			if g.Memory.TotalBytes < Unknown || g.Memory.UsedBytes < Unknown || g.Memory.FreeBytes < Unknown {
				return fmt.Errorf("reading %d, GPU %d: negative memory", i, j)
			}
		}
	}
	return nil
}
