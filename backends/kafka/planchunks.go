package kafka

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PlanChunkTopic holds the content of stored plans, compressed and cut into
// chunks well under any broker's message size limit, so a plan of any size
// can be stored. PlanTopic keeps only a small manifest per plan (and the
// signatures), so listing plans or loading one never reads the content of
// every other plan.
const PlanChunkTopic = "__berth_redrive_plan_chunks"

// planChunkSize is the largest chunk value: a quarter of Kafka's default
// message.max.bytes, so a batch of chunks (and brokers configured below the
// default) still fits.
const planChunkSize = 256 << 10

// planEncoding names how a manifest's chunks decode: their concatenation is
// a zstd stream of one JSON document.
const planEncoding = "zstd+json"

// Documents a manifest's chunks can hold: a v1 plan (redrive.Plan).
const contentPlanV1 = "berth-redrive-plan/v1"

// planManifest says where a stored plan's content is. It is written to
// PlanTopic only after every chunk is acknowledged, so a reader that sees a
// manifest finds all its chunks: a plan is never seen half written. A write
// killed before its manifest leaves unreferenced chunks, never a plan.
type planManifest struct {
	// Content names the document (contentPlanV1, redrive.PlanFormat).
	Content   string     `json:"content"`
	Encoding  string     `json:"encoding"`
	Size      int64      `json:"size"` // uncompressed JSON bytes
	Topic     string     `json:"topic"`
	Partition int32      `json:"partition"`
	Chunks    []chunkRef `json:"chunks"`
}

// chunkRef is one chunk: where it is and the SHA-256 of its bytes (a chunk
// rewritten under the same key, or read from the wrong offset, is refused).
type chunkRef struct {
	Offset int64  `json:"offset"`
	SHA256 string `json:"sha256"`
}

// jsonDoc writes v as json.Encoder does (JSON and a newline).
func jsonDoc(v any) func(io.Writer) error {
	return func(w io.Writer) error { return json.NewEncoder(w).Encode(v) }
}

// encodeDoc compresses the document write writes and cuts it into chunks,
// compressing as it is written (the uncompressed JSON is never held whole)
// into chunks allocated at their size (a growing buffer would hold up to
// twice the compressed plan, ~40 MB at a million records).
func encodeDoc(write func(io.Writer) error) (chunks [][]byte, size int64, err error) {
	var cw chunkWriter
	zw, err := zstd.NewWriter(&cw, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, 0, err
	}
	n := &countingWriter{w: zw}
	if err := write(n); err != nil {
		zw.Close()
		return nil, 0, err
	}
	if err := zw.Close(); err != nil {
		return nil, 0, err
	}
	return cw.chunks, n.n, nil
}

// chunkWriter cuts what is written to it into chunks of planChunkSize
// (the last one shorter).
type chunkWriter struct{ chunks [][]byte }

func (c *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		last := len(c.chunks) - 1
		if last < 0 || len(c.chunks[last]) == planChunkSize {
			c.chunks = append(c.chunks, make([]byte, 0, planChunkSize))
			last++
		}
		room := planChunkSize - len(c.chunks[last])
		k := min(room, len(p))
		c.chunks[last] = append(c.chunks[last], p[:k]...)
		p = p[k:]
	}
	return n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeChunks stores the chunks of the document doc writes and returns the
// manifest naming them.
func (s *PlanStore) writeChunks(ctx context.Context, hash, content string, doc func(io.Writer) error) (planManifest, error) {
	chunks, size, err := encodeDoc(doc)
	if err != nil {
		return planManifest{}, err
	}
	recs := make([]*kgo.Record, len(chunks))
	for i, c := range chunks {
		recs[i] = &kgo.Record{Key: []byte(fmt.Sprintf("chunk/%s/%d", hash, i)), Value: c}
	}
	if err := s.produce(ctx, PlanChunkTopic, recs...); err != nil {
		return planManifest{}, err
	}
	m := planManifest{Content: content, Encoding: planEncoding, Size: size, Topic: PlanChunkTopic, Partition: 0, Chunks: make([]chunkRef, len(recs))}
	for i, r := range recs {
		if r.Partition != 0 {
			return planManifest{}, fmt.Errorf("%s: chunk written to partition %d (the store has one partition)", PlanChunkTopic, r.Partition)
		}
		sum := sha256.Sum256(chunks[i])
		m.Chunks[i] = chunkRef{Offset: r.Offset, SHA256: hex.EncodeToString(sum[:])}
	}
	return m, nil
}

// readChunks fetches exactly the manifest's chunks (one ranged read from
// the first to the last) and decodes them with decode, as the manifest's
// content, reading the document as it is decompressed. A chunk that is
// missing or whose bytes differ from the manifest is an error naming it.
func (s *PlanStore) readChunks(ctx context.Context, m planManifest, content string, decode func(io.Reader) error) error {
	if m.Content != content {
		return fmt.Errorf("holds %q, not %q", m.Content, content)
	}
	if m.Encoding != planEncoding {
		return fmt.Errorf("unknown plan encoding %q", m.Encoding)
	}
	if m.Topic != PlanChunkTopic {
		return fmt.Errorf("chunks in %q, not %s", m.Topic, PlanChunkTopic)
	}
	if len(m.Chunks) == 0 {
		return fmt.Errorf("manifest lists no chunks")
	}
	want := make(map[int64]int, len(m.Chunks))
	lo, hi := m.Chunks[0].Offset, m.Chunks[0].Offset
	for i, c := range m.Chunks {
		want[c.Offset] = i
		lo, hi = min(lo, c.Offset), max(hi, c.Offset)
	}
	got := make([][]byte, len(m.Chunks))
	stats, err := s.c.readRanges(ctx, []readRange{{topic: m.Topic, partition: m.Partition, from: lo, end: hi + 1}}, 0, s.Idle, func(r *kgo.Record) {
		if i, ok := want[r.Offset]; ok {
			got[i] = r.Value
		}
	}, nil)
	if err != nil {
		return err
	}
	if !stats.complete() {
		return fmt.Errorf("%s: could not read chunks %d..%d (stopped short)", m.Topic, lo, hi)
	}
	readers := make([]io.Reader, len(got))
	for i, b := range got {
		c := m.Chunks[i]
		if b == nil {
			return fmt.Errorf("chunk %d (%s offset %d) is missing", i, m.Topic, c.Offset)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != c.SHA256 {
			return fmt.Errorf("chunk %d (%s offset %d) does not match its digest", i, m.Topic, c.Offset)
		}
		readers[i] = bytes.NewReader(b)
		// Held by its reader only: io.MultiReader drops each reader it
		// has read to the end, so the compressed plan (~40 MB at a
		// million records) is released as it is decoded, before the
		// records are built.
		got[i] = nil
	}
	zr, err := zstd.NewReader(io.MultiReader(readers...), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
	if err != nil {
		return err
	}
	defer zr.Close()
	// Bounded by the manifest's size: a forged manifest cannot make a
	// reader decompress without end.
	if err := decode(io.LimitReader(zr, m.Size)); err != nil {
		return fmt.Errorf("chunks do not decode to a plan: %v", err)
	}
	return nil
}

// decodeInto decodes one JSON document into v, unknown fields refused.
func decodeInto(v any) func(io.Reader) error {
	return func(r io.Reader) error {
		dec := json.NewDecoder(r)
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
}
