package analyze

import (
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

// MetaSamples is the snapshot Meta key under which a [Recorder] stores its
// samples, one "t_us:allocated:reserved:requested" entry per sample
// separated by spaces (t_us is microseconds since the recording started;
// the others are bytes). Package trace keeps unknown Meta keys, so the file
// stays a plain vram JSON snapshot that "vram replay" reads too.
const MetaSamples = "vram.analyze.samples"

// MetaSampleInterval records the Recorder's interval in microseconds.
const MetaSampleInterval = "vram.analyze.sample_interval_us"

// Sample is the allocator's memory at one moment of a recording, in bytes.
type Sample struct {
	// TimeUS is microseconds since the recording started.
	TimeUS         int64 `json:"time_us"`
	AllocatedBytes int64 `json:"allocated_bytes"`
	ReservedBytes  int64 `json:"reserved_bytes"`
	RequestedBytes int64 `json:"requested_bytes"`
}

// Recorder records a run's memory timeline in-process: it samples an
// allocator's statistics at a fixed interval and, at the end, writes the
// allocator's snapshot (with its event history, if history recording is
// on) and the samples as one vram JSON snapshot that "vram analyze --html"
// draws. It works from two functions, so that it needs nothing but
// package memory:
//
//	dev := vram.CUDA(0)
//	vram.RecordMemoryHistory(dev, true, 0, true) // events with stacks
//	rec := analyze.NewRecorder(
//		func() memory.Stats { return vram.MemoryStats(dev) },
//		func() *trace.Snapshot { return vram.MemorySnapshot(dev) },
//		100*time.Millisecond)
//	rec.Start()
//	train()
//	rec.Stop()
//	err := rec.WriteFile("run.json") // then: vram analyze --html run.html run.json
//
// A Recorder is safe for concurrent use.
type Recorder struct {
	stats    func() memory.Stats
	snapshot func() *trace.Snapshot
	interval time.Duration

	mu      sync.Mutex
	start   time.Time
	samples []Sample
	stop    chan struct{}
	done    chan struct{}
}

// MinRecorderInterval is the shortest sampling interval a Recorder uses:
// a sample costs a copy of the allocator's statistics under its lock.
const MinRecorderInterval = time.Millisecond

// NewRecorder returns a recorder that calls stats every interval (at least
// [MinRecorderInterval]) once started, and snapshot when it writes. Either
// function may be nil: without stats there are no samples, without
// snapshot the file holds the samples alone.
func NewRecorder(stats func() memory.Stats, snapshot func() *trace.Snapshot, interval time.Duration) *Recorder {
	return &Recorder{stats: stats, snapshot: snapshot, interval: max(interval, MinRecorderInterval)}
}

// Start begins sampling in a goroutine, after taking a first sample. A
// second Start while running does nothing. Call [Recorder.Stop] to end it.
func (r *Recorder) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop != nil {
		return
	}
	if r.start.IsZero() {
		r.start = time.Now()
	}
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	r.sampleLocked()
	go r.loop(r.stop, r.done)
}

func (r *Recorder) loop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.Sample()
		}
	}
}

// Stop ends sampling, after taking a last sample, and waits for the
// sampling goroutine. Stopping a recorder that is not running does
// nothing. It may be started again; samples accumulate.
func (r *Recorder) Stop() {
	r.mu.Lock()
	stop, done := r.stop, r.done
	r.stop, r.done = nil, nil
	r.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
	r.Sample()
}

// Sample takes one sample now, besides the periodic ones (at a point of
// interest: the end of a step, just before an allocation that may fail).
func (r *Recorder) Sample() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.start.IsZero() {
		r.start = time.Now()
	}
	r.sampleLocked()
}

func (r *Recorder) sampleLocked() {
	if r.stats == nil {
		return
	}
	st := r.stats()
	r.samples = append(r.samples, Sample{
		TimeUS:         time.Since(r.start).Microseconds(),
		AllocatedBytes: st.AllocatedBytes[memory.StatAll].Current,
		ReservedBytes:  st.ReservedBytes[memory.StatAll].Current,
		RequestedBytes: st.RequestedBytes[memory.StatAll].Current,
	})
}

// Samples returns a copy of the samples taken so far.
func (r *Recorder) Samples() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Sample(nil), r.samples...)
}

// Snapshot returns what [Recorder.WriteJSON] writes: the allocator's
// snapshot (an empty one when there is no snapshot function) with the
// samples in its Meta under [MetaSamples].
func (r *Recorder) Snapshot() *trace.Snapshot {
	var s *trace.Snapshot
	if r.snapshot != nil {
		s = r.snapshot()
	}
	if s == nil {
		s = &trace.Snapshot{}
	}
	cp := *s
	cp.Meta = maps.Clone(s.Meta)
	if cp.Meta == nil {
		cp.Meta = map[string]string{}
	}
	if cp.Meta[trace.MetaSource] == "" {
		cp.Meta[trace.MetaSource] = "vram analyze.Recorder"
	}
	r.mu.Lock()
	cp.Meta[MetaSamples] = encodeSamples(r.samples)
	cp.Meta[MetaSampleInterval] = strconv.FormatInt(r.interval.Microseconds(), 10)
	r.mu.Unlock()
	return &cp
}

// WriteJSON writes the recording as a vram JSON snapshot (see
// [Recorder.Snapshot]) through trace.WriteJSON.
func (r *Recorder) WriteJSON(w io.Writer) error {
	return trace.WriteJSON(w, r.Snapshot())
}

// WriteFile writes the recording to path, as [WriteHTMLFile] writes a
// page: a regular file is replaced whole, a symbolic link's target is
// written, a device or named pipe is written in place.
func (r *Recorder) WriteFile(path string) error {
	return writeFileAtomic(path, r.WriteJSON)
}

func encodeSamples(ss []Sample) string {
	var b strings.Builder
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d:%d:%d", s.TimeUS, s.AllocatedBytes, s.ReservedBytes, s.RequestedBytes)
	}
	return b.String()
}

// samplesFromMeta decodes the samples a Recorder stored; nil when there
// are none or they do not parse.
func samplesFromMeta(meta map[string]string) []Sample {
	ss, _ := readSamples(meta)
	return ss
}

// readSamples decodes the samples a Recorder stored: nil and no error
// when there are none, nil and why when they do not parse.
func readSamples(meta map[string]string) ([]Sample, error) {
	v, ok := meta[MetaSamples]
	if !ok || v == "" {
		return nil, nil
	}
	return decodeSamples(v)
}

// maxSampleQuote bounds the bytes of a bad sample an error quotes.
const maxSampleQuote = 60

func decodeSamples(v string) ([]Sample, error) {
	var out []Sample
	n := 0
	for f := range strings.FieldsSeq(v) {
		n++
		bad := func(why string) error {
			return fmt.Errorf("the Recorder's samples (%s) cannot be read: sample %d %s: %s", MetaSamples, n, strconv.Quote(clipText(f, maxSampleQuote)), why)
		}
		parts := strings.Split(f, ":")
		if len(parts) != 4 {
			return nil, bad("want time_us:allocated:reserved:requested")
		}
		var x [4]int64
		for i, p := range parts {
			v, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				return nil, bad("not a decimal number")
			}
			if v < 0 {
				return nil, bad("negative")
			}
			x[i] = v
		}
		out = append(out, Sample{TimeUS: x[0], AllocatedBytes: x[1], ReservedBytes: x[2], RequestedBytes: x[3]})
	}
	return out, nil
}
