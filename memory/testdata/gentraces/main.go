// Command gentraces writes the synthetic allocation traces in
// memory/testdata: PyTorch-like tensor lifetimes of three workloads whose
// shapes change from step to step, the case where caching allocators
// fragment most. Run it in memory/testdata, where it writes the files:
//
//	go run ./gentraces
//
// It is deterministic (fixed seeds), so the files only change when this
// program does. The models follow what PyTorch 2.x does in eager mode:
//
//   - synth_transformer_train_varlen: a GPT-2-small-sized decoder (12 layers,
//     d=768, 12 heads, vocabulary 50257) trained with AdamW under bf16
//     autocast, batch 8, sequence length drawn from 64..1024 each step;
//     weights, gradients and optimizer state in fp32, activations in bf16,
//     autocast's bf16 weight copies alive during the forward pass,
//     eager attention (the probabilities are saved), gradients set to
//     None by zero_grad.
//   - synth_gpt_generate_varbatch: inference with a KV cache grown by torch.cat
//     each decoding step, as Hugging Face's legacy cache did, for requests
//     of varying batch size, prompt length and output length (6 layers,
//     d=1024, fp16).
//   - synth_resnet50_infer_varbatch: ResNet-50 inference (fp16, no_grad) with a
//     batch size drawn from 1..64 for each request.
//   - synth_bert_infer_varlen and synth_bert_infer_varlen_long: an inference
//     server running a BERT-base encoder (12 layers, d=768, 12 heads,
//     eager attention) on requests whose batch size and sequence length
//     both vary, in fp32 and in fp16.
//   - synth_gpt_serve_kvcache: a decoder server that keeps up to six
//     requests in flight and decodes them in turn, one token each, every
//     one with its own KV cache grown by torch.cat: caches of different
//     lengths are born and die interleaved.
//   - synth_two_models: BERT-base and ResNet-50 inference in one process,
//     requests of either model interleaved at random.
//   - synth_resnet50_infer_varbatch_seed3 and _seed5,
//     synth_transformer_train_varlen_seed1: those generators drawn with
//     other seeds (seed n adds 100n to both words of the generator's own),
//     so that a placement policy tuned on the traces above is checked on
//     draws it was not tuned on.
//
// Addresses are unique fake device addresses; every free is a
// free_requested followed by a free_completed, as in a PyTorch trace of a
// single-stream program.
package main

import (
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/vramgo/vram/memory/trace"
)

// tracer emits alloc and free events with unique addresses.
type tracer struct {
	w    *trace.TextWriter
	next uint64
	live map[uint64]int64
	peak int64
	cur  int64
}

func newTracer(w *trace.TextWriter) *tracer {
	return &tracer{w: w, next: 0x7f0000000000, live: map[uint64]int64{}}
}

func (t *tracer) alloc(n int64) uint64 {
	if n <= 0 {
		n = 1
	}
	a := t.next
	t.next += 512
	t.live[a] = n
	t.cur += n
	t.peak = max(t.peak, t.cur)
	must(t.w.Write(trace.Event{Action: trace.ActionAlloc, Addr: a, Size: n}))
	return a
}

func (t *tracer) free(a uint64) {
	n, ok := t.live[a]
	if !ok {
		panic("double free in generator")
	}
	delete(t.live, a)
	t.cur -= n
	must(t.w.Write(trace.Event{Action: trace.ActionFreeRequested, Addr: a, Size: n}))
	must(t.w.Write(trace.Event{Action: trace.ActionFreeCompleted, Addr: a, Size: n}))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func write(name, comment string, gen func(t *tracer)) {
	f, err := os.Create(name)
	must(err)
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	must(err)
	w := trace.NewTextWriter(zw, comment)
	t := newTracer(w)
	gen(t)
	must(w.Flush())
	must(zw.Close())
	must(f.Close())
	fmt.Fprintf(os.Stderr, "%s: peak live %.2f GiB\n", name, float64(t.peak)/(1<<30))
}

func main() {
	write("synth_transformer_train_varlen.trace.gz",
		"synthetic (gentraces): GPT-2-small training, AdamW, bf16 autocast, batch 8, sequence length 64..1024 per step",
		func(t *tracer) { transformerTrain(t, rand.New(rand.NewPCG(1, 2))) })
	write("synth_gpt_generate_varbatch.trace.gz",
		"synthetic (gentraces): decoder inference with a torch.cat KV cache, batch 1..32, prompt 16..512, output 8..64 tokens",
		gptGenerate)
	write("synth_resnet50_infer_varbatch.trace.gz",
		"synthetic (gentraces): ResNet-50 inference, fp16, batch 1..64 per request",
		func(t *tracer) { resnetInfer(t, rand.New(rand.NewPCG(5, 6))) })
	write("synth_bert_infer_varlen.trace.gz",
		"synthetic (gentraces): BERT-base encoder inference, fp32, batch 1..32 x length 8..512 per request, 300 requests",
		func(t *tracer) { bertInfer(t, rand.New(rand.NewPCG(7, 8)), fp32, 32, 8, 512, 300) })
	write("synth_bert_infer_varlen_long.trace.gz",
		"synthetic (gentraces): BERT-base encoder inference, fp16, batch 1..128 x length 16..384 per request, 900 requests",
		func(t *tracer) { bertInfer(t, rand.New(rand.NewPCG(9, 10)), bf16, 128, 16, 384, 900) })
	write("synth_gpt_serve_kvcache.trace.gz",
		"synthetic (gentraces): decoder server, up to 6 requests at once, each with a KV cache grown by torch.cat per token",
		gptServe)
	write("synth_two_models.trace.gz",
		"synthetic (gentraces): BERT-base (fp16) and ResNet-50 (fp16) inference sharing a GPU, requests interleaved at random",
		twoModels)
	// The same generators with other seeds.
	for _, seed := range []uint64{3, 5} {
		write(fmt.Sprintf("synth_resnet50_infer_varbatch_seed%d.trace.gz", seed),
			fmt.Sprintf("synthetic (gentraces): ResNet-50 inference, fp16, batch 1..64 per request, seed %d", seed),
			func(t *tracer) { resnetInfer(t, rand.New(rand.NewPCG(5+100*seed, 6+100*seed))) })
	}
	write("synth_transformer_train_varlen_seed1.trace.gz",
		"synthetic (gentraces): GPT-2-small training, AdamW, bf16 autocast, batch 8, sequence length 64..1024 per step, seed 1",
		func(t *tracer) { transformerTrain(t, rand.New(rand.NewPCG(1+100, 2+100))) })
}

const (
	fp32 = 4
	bf16 = 2
)

// transformerTrain models 40 training steps of a GPT-2-small decoder,
// the sequence lengths drawn from rng.
func transformerTrain(t *tracer, rng *rand.Rand) {
	const (
		L, d, heads, V, B = 12, 768, 12, 50257, 8
		maxPos            = 1024
		steps             = 40
	)
	// Parameters, fp32, allocated once in module order.
	type param struct {
		n    int64 // elements
		addr uint64
	}
	var params []*param
	newParam := func(n int64) *param {
		p := &param{n: n, addr: t.alloc(n * fp32)}
		params = append(params, p)
		return p
	}
	wte := newParam(V * d)
	wpe := newParam(maxPos * d)
	type layer struct{ ln1w, ln1b, qkv, qkvb, proj, projb, ln2w, ln2b, fc1, fc1b, fc2, fc2b *param }
	layers := make([]layer, L)
	for i := range layers {
		layers[i] = layer{newParam(d), newParam(d), newParam(d * 3 * d), newParam(3 * d), newParam(d * d), newParam(d),
			newParam(d), newParam(d), newParam(d * 4 * d), newParam(4 * d), newParam(4 * d * d), newParam(d)}
	}
	lnfw, lnfb := newParam(d), newParam(d)
	var expAvg, expAvgSq []uint64
	grads := map[*param]uint64{}

	for step := 0; step < steps; step++ {
		S := int64(64 + 8*rng.IntN((1024-64)/8+1))
		BS := int64(B) * S
		tokens := t.alloc(BS * 8)
		targets := t.alloc(BS * 8)
		// autocast keeps a bf16 copy of every weight used in a matmul
		// until the forward pass ends.
		var casts []uint64
		cast := func(p *param) { casts = append(casts, t.alloc(p.n*bf16)) }
		var saved []uint64 // activations kept for backward, in order
		save := func(n int64) { saved = append(saved, t.alloc(n)) }

		// Forward.
		save(BS * d * fp32) // embeddings sum (fp32 outside autocast matmuls)
		for i := range layers {
			ly := &layers[i]
			save(BS * d * bf16) // ln1 out
			save(BS * fp32)     // mean
			save(BS * fp32)     // rstd
			cast(ly.qkv)
			save(BS * 3 * d * bf16) // qkv
			scores := t.alloc(B * heads * S * S * bf16)
			save(B * heads * S * S * bf16) // softmax probs
			t.free(scores)
			save(BS * d * bf16) // attention context
			cast(ly.proj)
			tmp := t.alloc(BS * d * bf16)
			save(BS * d * fp32) // residual 1
			t.free(tmp)
			save(BS * d * bf16) // ln2 out
			save(BS * fp32)
			save(BS * fp32)
			cast(ly.fc1)
			save(BS * 4 * d * bf16) // fc1 out
			save(BS * 4 * d * bf16) // gelu out
			cast(ly.fc2)
			tmp = t.alloc(BS * d * bf16)
			save(BS * d * fp32) // residual 2
			t.free(tmp)
		}
		save(BS * d * bf16) // final ln out
		cast(wte)
		logits := t.alloc(BS * V * bf16)
		lsm := t.alloc(BS * V * fp32) // log_softmax in fp32
		t.free(logits)
		loss := t.alloc(4)
		for _, c := range casts {
			t.free(c)
		}

		// Backward: gradients of parameters are allocated as they are
		// produced; saved activations go as their layer is done.
		grad := func(p *param) {
			g := t.alloc(p.n * fp32)
			grads[p] = g
		}
		gl := t.alloc(BS * V * fp32)
		t.free(lsm)
		gh := t.alloc(BS * d * bf16)
		grad(wte)
		tmpw := t.alloc(wte.n * bf16)
		t.free(tmpw)
		t.free(gl)
		t.free(saved[len(saved)-1]) // final ln out
		saved = saved[:len(saved)-1]
		gx := t.alloc(BS * d * fp32)
		grad(lnfw)
		grad(lnfb)
		t.free(gh)
		const per = 13 // activations saved per layer
		for i := L - 1; i >= 0; i-- {
			ly := &layers[i]
			mine := saved[len(saved)-per:]
			saved = saved[:len(saved)-per]
			t.free(mine[12]) // residual 2: only the next layer's input
			// MLP.
			g1 := t.alloc(BS * d * bf16)
			grad(ly.fc2)
			grad(ly.fc2b)
			g2 := t.alloc(BS * 4 * d * bf16)
			t.free(g1)
			t.free(mine[11]) // gelu out
			g3 := t.alloc(BS * 4 * d * bf16)
			t.free(g2)
			t.free(mine[10]) // fc1 out
			grad(ly.fc1)
			grad(ly.fc1b)
			g4 := t.alloc(BS * d * bf16)
			t.free(g3)
			t.free(mine[7]) // ln2 out
			gx2 := t.alloc(BS * d * fp32)
			t.free(g4)
			t.free(mine[8])
			t.free(mine[9])
			t.free(mine[6]) // residual 1, ln2's input
			grad(ly.ln2w)
			grad(ly.ln2b)
			t.free(gx) // added into gx2 in place
			gx = gx2
			// Attention.
			g5 := t.alloc(BS * d * bf16)
			grad(ly.proj)
			grad(ly.projb)
			t.free(mine[5]) // context
			gp := t.alloc(B * heads * S * S * bf16)
			gv := t.alloc(BS * d * bf16)
			t.free(g5)
			gs := t.alloc(B * heads * S * S * bf16)
			t.free(gp)
			t.free(mine[4]) // probabilities
			gqkv := t.alloc(BS * 3 * d * bf16)
			t.free(gs)
			t.free(gv)
			t.free(mine[3]) // qkv
			grad(ly.qkv)
			grad(ly.qkvb)
			g6 := t.alloc(BS * d * bf16)
			t.free(gqkv)
			t.free(mine[0]) // ln1 out
			gx1 := t.alloc(BS * d * fp32)
			t.free(g6)
			t.free(mine[1])
			t.free(mine[2])
			grad(ly.ln1w)
			grad(ly.ln1b)
			t.free(gx)
			gx = gx1
		}
		grad(wpe)
		t.free(saved[0])
		t.free(gx)
		t.free(loss)
		t.free(tokens)
		t.free(targets)

		// AdamW (foreach): state on the first step, temporaries per
		// parameter, then zero_grad(set_to_none=True).
		if expAvg == nil {
			for _, p := range params {
				expAvg = append(expAvg, t.alloc(p.n*fp32))
				expAvgSq = append(expAvgSq, t.alloc(p.n*fp32))
			}
		}
		var tmps []uint64
		for _, p := range params {
			tmps = append(tmps, t.alloc(p.n*fp32))
		}
		for _, a := range tmps {
			t.free(a)
		}
		for _, p := range params {
			if g, ok := grads[p]; ok {
				t.free(g)
				delete(grads, p)
			}
		}
	}
}

// gptGenerate models a server answering 24 generation requests one at a
// time, with the KV cache grown by concatenation.
func gptGenerate(t *tracer) {
	rng := rand.New(rand.NewPCG(3, 4))
	const (
		L, d, heads, V = 6, 1024, 16, 32000
		fp16           = 2
		requests       = 24
	)
	for i := 0; i < L; i++ { // weights
		t.alloc(d * fp16 * 2)
		t.alloc(d * 3 * d * fp16)
		t.alloc(d * d * fp16)
		t.alloc(d * fp16 * 2)
		t.alloc(d * 4 * d * fp16)
		t.alloc(4 * d * d * fp16)
	}
	t.alloc(V * d * fp16)
	for r := 0; r < requests; r++ {
		B := int64(1 + rng.IntN(32))
		P := int64(16 + rng.IntN(497))
		G := 8 + rng.IntN(57)
		ids := t.alloc(B * P * 8)
		k := make([]uint64, L)
		v := make([]uint64, L)
		// Prefill.
		x := t.alloc(B * P * d * fp16)
		for i := 0; i < L; i++ {
			h := t.alloc(B * P * d * fp16)
			qkv := t.alloc(B * P * 3 * d * fp16)
			k[i] = t.alloc(B * P * d * fp16)
			v[i] = t.alloc(B * P * d * fp16)
			sc := t.alloc(B * heads * P * P * fp16)
			pr := t.alloc(B * heads * P * P * fp16)
			t.free(sc)
			ctx := t.alloc(B * P * d * fp16)
			t.free(pr)
			t.free(qkv)
			o := t.alloc(B * P * d * fp16)
			t.free(ctx)
			x2 := t.alloc(B * P * d * fp16)
			t.free(o)
			t.free(h)
			t.free(x)
			h2 := t.alloc(B * P * d * fp16)
			u := t.alloc(B * P * 4 * d * fp16)
			t.free(h2)
			g := t.alloc(B * P * 4 * d * fp16)
			t.free(u)
			o2 := t.alloc(B * P * d * fp16)
			t.free(g)
			x = t.alloc(B * P * d * fp16)
			t.free(o2)
			t.free(x2)
		}
		logits := t.alloc(B * V * 4)
		t.free(x)
		out := t.alloc(B * 8)
		t.free(logits)
		// Decode, one token at a time.
		S := P
		for s := 0; s < G; s++ {
			x := t.alloc(B * d * fp16)
			for i := 0; i < L; i++ {
				h := t.alloc(B * d * fp16)
				qkv := t.alloc(B * 3 * d * fp16)
				nk := t.alloc(B * (S + 1) * d * fp16) // torch.cat
				t.free(k[i])
				k[i] = nk
				nv := t.alloc(B * (S + 1) * d * fp16)
				t.free(v[i])
				v[i] = nv
				sc := t.alloc(B * heads * (S + 1) * fp16)
				ctx := t.alloc(B * d * fp16)
				t.free(sc)
				t.free(qkv)
				o := t.alloc(B * d * fp16)
				t.free(ctx)
				x2 := t.alloc(B * d * fp16)
				t.free(o)
				t.free(h)
				t.free(x)
				u := t.alloc(B * 4 * d * fp16)
				g := t.alloc(B * 4 * d * fp16)
				t.free(u)
				o2 := t.alloc(B * d * fp16)
				t.free(g)
				x = t.alloc(B * d * fp16)
				t.free(o2)
				t.free(x2)
			}
			logits := t.alloc(B * V * 4)
			t.free(x)
			tok := t.alloc(B * 8)
			t.free(logits)
			nout := t.alloc(B * (int64(s) + 2) * 8)
			t.free(out)
			out = nout
			t.free(tok)
			S++
		}
		for i := 0; i < L; i++ {
			t.free(k[i])
			t.free(v[i])
		}
		t.free(out)
		t.free(ids)
	}
}

// resnetInfer models 60 requests of ResNet-50 inference at 224x224, the
// batch sizes drawn from rng.
func resnetInfer(t *tracer, rng *rand.Rand) {
	request := newResNet50(t)
	for r := 0; r < 60; r++ {
		request(int64(1 + rng.IntN(64)))
	}
}

// newResNet50 allocates the fp16 weights of ResNet-50 (batch norm folded)
// and returns a function that runs one no_grad request on a batch of B
// images of 224x224 and copies the logits to the host.
func newResNet50(t *tracer) func(B int64) {
	const fp16 = 2
	type conv struct{ cin, cout, k, stride int64 }
	// Weights of the 53 convolutions and the classifier.
	var weights []conv
	stem := conv{3, 64, 7, 2}
	weights = append(weights, stem)
	type stage struct{ blocks, mid, out, stride int64 }
	stages := []stage{{3, 64, 256, 1}, {4, 128, 512, 2}, {6, 256, 1024, 2}, {3, 512, 2048, 2}}
	cin := int64(64)
	for _, s := range stages {
		for b := int64(0); b < s.blocks; b++ {
			st := int64(1)
			if b == 0 {
				st = s.stride
			}
			weights = append(weights, conv{cin, s.mid, 1, 1}, conv{s.mid, s.mid, 3, st}, conv{s.mid, s.out, 1, 1})
			if b == 0 {
				weights = append(weights, conv{cin, s.out, 1, st})
			}
			cin = s.out
		}
	}
	for _, w := range weights {
		t.alloc(w.cin * w.cout * w.k * w.k * fp16)
		t.alloc(w.cout * fp16) // folded batch norm
	}
	t.alloc(2048 * 1000 * fp16)
	return func(B int64) {
		in := t.alloc(B * 3 * 224 * 224 * fp16)
		x := t.alloc(B * 64 * 112 * 112 * fp16) // stem conv
		t.free(in)
		hw := int64(56)
		p := t.alloc(B * 64 * hw * hw * fp16) // max pool
		t.free(x)
		x = p
		c := int64(64)
		for si, s := range stages {
			for b := int64(0); b < s.blocks; b++ {
				ohw := hw
				if b == 0 && si > 0 {
					ohw = hw / 2
				}
				y1 := t.alloc(B * s.mid * hw * hw * fp16)
				y2 := t.alloc(B * s.mid * ohw * ohw * fp16)
				t.free(y1)
				y3 := t.alloc(B * s.out * ohw * ohw * fp16)
				t.free(y2)
				var id uint64
				if b == 0 {
					id = t.alloc(B * s.out * ohw * ohw * fp16)
				}
				out := t.alloc(B * s.out * ohw * ohw * fp16) // add + relu
				t.free(y3)
				if b == 0 {
					t.free(id)
				}
				t.free(x)
				x, hw, c = out, ohw, s.out
			}
		}
		pooled := t.alloc(B * c * fp16)
		t.free(x)
		logits := t.alloc(B * 1000 * fp16)
		t.free(pooled)
		cpu := t.alloc(B * 1000 * 4)
		t.free(logits)
		t.free(cpu)
	}
}

// bert is a BERT-base encoder held on the device for inference.
type bert struct {
	t    *tracer
	elem int64 // bytes per activation element
}

const (
	bertLayers, bertD, bertHeads, bertFF, bertVocab = 12, 768, 12, 3072, 30522
)

// newBERT allocates the weights of a BERT-base encoder with elem-byte
// elements.
func newBERT(t *tracer, elem int64) *bert {
	t.alloc(bertVocab * bertD * elem) // word embeddings
	t.alloc(512 * bertD * elem)       // positions
	t.alloc(2 * bertD * elem)         // token types
	t.alloc(2 * bertD * elem)         // embedding layer norm
	for i := 0; i < bertLayers; i++ {
		t.alloc(3 * bertD * bertD * elem) // in_proj
		t.alloc(3 * bertD * elem)
		t.alloc(bertD * bertD * elem) // out_proj
		t.alloc(bertD * elem)
		t.alloc(bertD * bertFF * elem) // linear1
		t.alloc(bertFF * elem)
		t.alloc(bertFF * bertD * elem) // linear2
		t.alloc(bertD * elem)
		t.alloc(4 * bertD * elem) // two layer norms
	}
	t.alloc(bertD * bertD * elem) // pooler
	t.alloc(bertD * elem)
	return &bert{t: t, elem: elem}
}

// request runs one no_grad forward pass on a batch of B sequences of S
// tokens and copies the pooled output to the host.
func (m *bert) request(B, S int64) {
	t, e := m.t, m.elem
	BS := B * S
	ids := t.alloc(BS * 8)
	mask := t.alloc(B * S * 1)
	x := t.alloc(BS * bertD * e) // embeddings
	pos := t.alloc(BS * bertD * e)
	y := t.alloc(BS * bertD * e)
	t.free(pos)
	t.free(x)
	x = t.alloc(BS * bertD * e) // layer norm
	t.free(y)
	t.free(ids)
	for i := 0; i < bertLayers; i++ {
		qkv := t.alloc(BS * 3 * bertD * e)
		sc := t.alloc(B * bertHeads * S * S * e)
		maskf := t.alloc(B * bertHeads * S * S * e) // scores + mask
		t.free(sc)
		pr := t.alloc(B * bertHeads * S * S * e) // softmax
		t.free(maskf)
		ctx := t.alloc(BS * bertD * e)
		t.free(pr)
		t.free(qkv)
		ctxc := t.alloc(BS * bertD * e) // transpose(1, 2).contiguous()
		t.free(ctx)
		o := t.alloc(BS * bertD * e)
		t.free(ctxc)
		r := t.alloc(BS * bertD * e) // x + attention
		t.free(o)
		t.free(x)
		h := t.alloc(BS * bertD * e) // norm1
		t.free(r)
		u := t.alloc(BS * bertFF * e)
		g := t.alloc(BS * bertFF * e) // gelu
		t.free(u)
		f := t.alloc(BS * bertD * e)
		t.free(g)
		r2 := t.alloc(BS * bertD * e)
		t.free(f)
		x = t.alloc(BS * bertD * e) // norm2
		t.free(r2)
		t.free(h)
	}
	cls := t.alloc(B * bertD * e)
	t.free(x)
	pooled := t.alloc(B * bertD * e)
	t.free(cls)
	host := t.alloc(B * bertD * fp32) // .float() before .cpu()
	t.free(pooled)
	t.free(host)
	t.free(mask)
}

// bertInfer models an inference server answering n requests, each a batch
// of 1..maxB sequences of minS..maxS tokens (multiples of 8, as tokenizers
// pad to).
func bertInfer(t *tracer, rng *rand.Rand, elem int64, maxB, minS, maxS, n int) {
	m := newBERT(t, elem)
	for r := 0; r < n; r++ {
		B := int64(1 + rng.IntN(maxB))
		S := int64(minS + 8*rng.IntN((maxS-minS)/8+1))
		m.request(B, S)
	}
}

// gptServe models a decoder (6 layers, d=1024, fp16) serving 32 requests,
// up to six at a time: each step decodes one token of every request in
// flight, in turn, and each request's KV cache grows by torch.cat.
func gptServe(t *tracer) {
	rng := rand.New(rand.NewPCG(11, 12))
	const (
		L, d, heads, V = 6, 1024, 16, 32000
		fp16           = 2
		requests       = 32
		inFlight       = 6
	)
	for i := 0; i < L; i++ {
		t.alloc(d * fp16 * 4)
		t.alloc(d * 3 * d * fp16)
		t.alloc(d * d * fp16)
		t.alloc(d * 4 * d * fp16)
		t.alloc(4 * d * d * fp16)
	}
	t.alloc(V * d * fp16)
	type req struct {
		B, S int64
		left int
		k, v []uint64
		out  uint64
		n    int64
	}
	start := func() *req {
		r := &req{B: int64(1 + rng.IntN(8)), S: int64(16 + rng.IntN(1009)), left: 16 + rng.IntN(113)}
		B, P := r.B, r.S
		ids := t.alloc(B * P * 8)
		r.k, r.v = make([]uint64, L), make([]uint64, L)
		x := t.alloc(B * P * d * fp16)
		for i := 0; i < L; i++ {
			qkv := t.alloc(B * P * 3 * d * fp16)
			r.k[i] = t.alloc(B * P * d * fp16)
			r.v[i] = t.alloc(B * P * d * fp16)
			ctx := t.alloc(B * P * d * fp16) // fused attention
			t.free(qkv)
			o := t.alloc(B * P * d * fp16)
			t.free(ctx)
			u := t.alloc(B * P * 4 * d * fp16)
			g := t.alloc(B * P * 4 * d * fp16)
			t.free(u)
			x2 := t.alloc(B * P * d * fp16)
			t.free(g)
			t.free(o)
			t.free(x)
			x = x2
		}
		logits := t.alloc(B * V * 4)
		t.free(x)
		r.out = t.alloc(B * 8)
		r.n = 1
		t.free(logits)
		t.free(ids)
		return r
	}
	step := func(r *req) {
		B := r.B
		x := t.alloc(B * d * fp16)
		for i := 0; i < L; i++ {
			qkv := t.alloc(B * 3 * d * fp16)
			nk := t.alloc(B * (r.S + 1) * d * fp16)
			t.free(r.k[i])
			r.k[i] = nk
			nv := t.alloc(B * (r.S + 1) * d * fp16)
			t.free(r.v[i])
			r.v[i] = nv
			sc := t.alloc(B * heads * (r.S + 1) * fp16)
			ctx := t.alloc(B * d * fp16)
			t.free(sc)
			t.free(qkv)
			u := t.alloc(B * 4 * d * fp16)
			g := t.alloc(B * 4 * d * fp16)
			t.free(u)
			x2 := t.alloc(B * d * fp16)
			t.free(g)
			t.free(ctx)
			t.free(x)
			x = x2
		}
		logits := t.alloc(B * V * 4)
		t.free(x)
		r.n++
		nout := t.alloc(B * r.n * 8)
		t.free(r.out)
		r.out = nout
		t.free(logits)
		r.S++
		r.left--
	}
	finish := func(r *req) {
		for i := 0; i < L; i++ {
			t.free(r.k[i])
			t.free(r.v[i])
		}
		t.free(r.out)
	}
	var active []*req
	started := 0
	for started < requests || len(active) > 0 {
		for len(active) < inFlight && started < requests && (len(active) == 0 || rng.IntN(4) == 0) {
			active = append(active, start())
			started++
		}
		kept := active[:0]
		for _, r := range active {
			step(r)
			if r.left == 0 {
				finish(r)
			} else {
				kept = append(kept, r)
			}
		}
		active = kept
	}
}

// twoModels models one process serving a BERT-base encoder and ResNet-50,
// both fp16, 500 requests picked at random between them.
func twoModels(t *tracer) {
	rng := rand.New(rand.NewPCG(13, 14))
	m := newBERT(t, bf16)
	resnet := newResNet50(t)
	for r := 0; r < 500; r++ {
		if rng.IntN(2) == 0 {
			m.request(int64(1+rng.IntN(64)), int64(16+8*rng.IntN(63)))
		} else {
			resnet(int64(1 + rng.IntN(64)))
		}
	}
}
