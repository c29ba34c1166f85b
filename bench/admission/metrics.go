package admission

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// families are one scrape's metric families by name.
type families map[string]*dto.MetricFamily

// parseText reads a Prometheus text exposition (the API server's and OPA's /metrics).
func parseText(b []byte) (families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(b))
}

// ParseMetrics reads a Prometheus text exposition: another component's
// /metrics (bench/replay reads the scheduler's).
func ParseMetrics(text []byte) (Metrics, error) {
	f, err := parseText(text)
	return Metrics{f: f}, err
}

// scrape reads a webhook process's /metrics in the protobuf exposition,
// the one that carries native histograms (controller-runtime's webhook
// latency); the text exposition would give only its classic buckets.
func scrape(ctx context.Context, url string) (families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read %s: %s", url, resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	out := families{}
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("read %s: %w", url, err)
		}
		out[mf.GetName()] = mf
	}
}

// matching returns the metrics of a family whose labels include match.
func (f families) matching(name string, match map[string]string) []*dto.Metric {
	mf := f[name]
	if mf == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range mf.GetMetric() {
		ok := true
		for k, v := range match {
			if labelValue(m, k) != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// counter sums a counter family over the metrics matching match, leaving
// out those whose label skipLabel has the value skipValue.
func (f families) counter(name string, match map[string]string, skipLabel, skipValue string) float64 {
	var sum float64
	for _, m := range f.matching(name, match) {
		if skipLabel != "" && labelValue(m, skipLabel) == skipValue {
			continue
		}
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// Histogram is a reading of a Prometheus histogram, summed over the series
// that matched: classic cumulative buckets and, where the histogram is also
// native (controller-runtime's webhook latency), its sparse buckets.
type Histogram struct {
	Count, Sum float64
	// Bounds and Cumulative are the classic buckets' upper bounds and counts.
	Bounds, Cumulative []float64
	// Schema and Native are the native buckets: count by bucket index, bucket
	// i spanning (2^((i-1)/2^schema), 2^(i/2^schema)].
	Schema int32
	Native map[int32]float64
}

// histogram sums the histograms of a family matching match.
func (f families) histogram(name string, match map[string]string) Histogram {
	h := Histogram{}
	nativeOK := true
	for _, m := range f.matching(name, match) {
		mh := m.GetHistogram()
		h.Count += mh.GetSampleCountFloat() + float64(mh.GetSampleCount())
		h.Sum += mh.GetSampleSum()
		for _, b := range mh.GetBucket() {
			i, found := slices.BinarySearch(h.Bounds, b.GetUpperBound())
			if !found {
				h.Bounds = slices.Insert(h.Bounds, i, b.GetUpperBound())
				h.Cumulative = slices.Insert(h.Cumulative, i, 0)
			}
			h.Cumulative[i] += float64(b.GetCumulativeCount())
		}
		if len(mh.GetPositiveSpan()) == 0 {
			nativeOK = false
			continue
		}
		n := nativeBuckets(mh)
		if h.Native == nil {
			h.Schema, h.Native = mh.GetSchema(), n
			continue
		}
		h.Schema, h.Native = merge(h.Schema, h.Native, mh.GetSchema(), n, 1)
	}
	if !nativeOK {
		h.Native = nil
	}
	return h
}

// nativeBuckets expands a native histogram's spans and deltas into counts by index.
func nativeBuckets(h *dto.Histogram) map[int32]float64 {
	out := map[int32]float64{}
	var idx int32
	var count int64
	k := 0
	for i, s := range h.GetPositiveSpan() {
		if i == 0 {
			idx = s.GetOffset()
		} else {
			idx += s.GetOffset()
		}
		for range s.GetLength() {
			count += h.GetPositiveDelta()[k]
			out[idx] = float64(count)
			idx++
			k++
		}
	}
	return out
}

// merge adds b (times sign) to a, at the coarser of the two schemas.
func merge(sa int32, a map[int32]float64, sb int32, b map[int32]float64, sign float64) (int32, map[int32]float64) {
	s := min(sa, sb)
	out := downscale(a, sa-s)
	for i, c := range downscale(b, sb-s) {
		out[i] += sign * c
	}
	return s, out
}

// downscale merges 2^d buckets into one: index i becomes ceil(i / 2^d).
func downscale(m map[int32]float64, d int32) map[int32]float64 {
	out := make(map[int32]float64, len(m))
	for i, c := range m {
		out[(i+(1<<d)-1)>>d] += c
	}
	return out
}

// Sub is the histogram of the observations between before and h.
func (h Histogram) Sub(before Histogram) Histogram { return h.combine(before, -1) }

// Add is the histogram of both sets of observations.
func (h Histogram) Add(o Histogram) Histogram { return h.combine(o, 1) }

func (h Histogram) combine(o Histogram, sign float64) Histogram {
	out := Histogram{Count: h.Count + sign*o.Count, Sum: h.Sum + sign*o.Sum}
	bounds := slices.Clone(h.Bounds)
	for _, b := range o.Bounds {
		if _, ok := slices.BinarySearch(bounds, b); !ok {
			bounds = append(bounds, b)
			slices.Sort(bounds)
		}
	}
	for _, b := range bounds {
		out.Bounds = append(out.Bounds, b)
		out.Cumulative = append(out.Cumulative, h.cumulativeAt(b)+sign*o.cumulativeAt(b))
	}
	switch {
	case h.Native != nil && o.Native != nil:
		out.Schema, out.Native = merge(h.Schema, h.Native, o.Schema, o.Native, sign)
	case h.Native != nil && o.Count == 0:
		out.Schema, out.Native = h.Schema, h.Native
	case o.Native != nil && h.Count == 0:
		out.Schema, out.Native = merge(o.Schema, map[int32]float64{}, o.Schema, o.Native, sign)
	}
	return out
}

// cumulativeAt is the count at or below bound b, by the largest bucket bound not above it.
func (h Histogram) cumulativeAt(b float64) float64 {
	i, found := slices.BinarySearch(h.Bounds, b)
	if found {
		return h.Cumulative[i]
	}
	if i == 0 {
		return 0
	}
	return h.Cumulative[i-1]
}

// Above is how many observations were over b, where b is one of the
// classic bucket bounds (ok); false where it is not, and the buckets
// cannot tell.
func (h Histogram) Above(b float64) (n float64, ok bool) {
	i, found := slices.BinarySearch(h.Bounds, b)
	if !found {
		return 0, false
	}
	return h.Count - h.Cumulative[i], true
}

// Bound is the smallest classic bucket bound below which a fraction q of the
// observations fall: what the buckets can say for sure (+Inf past the last).
func (h Histogram) Bound(q float64) float64 {
	for i, b := range h.Bounds {
		if h.Cumulative[i] >= q*h.Count && h.Count > 0 {
			return b
		}
	}
	return math.Inf(1)
}

// Interpolated estimates the q-quantile as Prometheus' histogram_quantile
// does: linearly within the classic bucket that holds it.
func (h Histogram) Interpolated(q float64) float64 {
	if h.Count == 0 {
		return math.NaN()
	}
	rank := q * h.Count
	lower, below := 0.0, 0.0
	for i, b := range h.Bounds {
		if h.Cumulative[i] >= rank {
			if math.IsInf(b, 1) {
				return lower
			}
			in := h.Cumulative[i] - below
			if in <= 0 {
				return b
			}
			return lower + (b-lower)*(rank-below)/in
		}
		lower, below = b, h.Cumulative[i]
	}
	return lower
}

// NativeBound is the upper bound of the native bucket holding the q-quantile,
// NaN when the histogram is not native.
func (h Histogram) NativeBound(q float64) float64 {
	if len(h.Native) == 0 || h.Count == 0 {
		return math.NaN()
	}
	idx := make([]int32, 0, len(h.Native))
	for i := range h.Native {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	var cum float64
	for _, i := range idx {
		cum += h.Native[i]
		if cum >= q*h.Count {
			return math.Pow(2, float64(i)/math.Pow(2, float64(h.Schema)))
		}
	}
	return math.Pow(2, float64(idx[len(idx)-1])/math.Pow(2, float64(h.Schema)))
}

// Get returns the body of a 200 response from url, asked with client.
func Get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, b)
	}
	return b, nil
}

// Metrics is one scrape of a process's /metrics, for other benchmarks
// (gpuadmit-bench scale reads gpuadmit's).
type Metrics struct{ f families }

// ScrapeMetrics reads the /metrics at url in the protobuf exposition, so
// native histograms keep their fine buckets.
func ScrapeMetrics(ctx context.Context, url string) (Metrics, error) {
	f, err := scrape(ctx, url)
	return Metrics{f: f}, err
}

// Histogram sums histogram name over the series whose labels include match.
func (m Metrics) Histogram(name string, match map[string]string) Histogram {
	return m.f.histogram(name, match)
}

// Value sums counter, gauge or untyped family name over the series whose
// labels include match; 0 when there is none.
func (m Metrics) Value(name string, match map[string]string) float64 {
	var sum float64
	for _, x := range m.f.matching(name, match) {
		sum += x.GetCounter().GetValue() + x.GetGauge().GetValue() + x.GetUntyped().GetValue()
	}
	return sum
}

// By is family name's value by the value of label, summed over the rest.
func (m Metrics) By(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, x := range m.f.matching(name, nil) {
		out[labelValue(x, label)] += x.GetCounter().GetValue() + x.GetGauge().GetValue() + x.GetUntyped().GetValue()
	}
	return out
}

// Has reports whether the scrape holds family name at all.
func (m Metrics) Has(name string) bool { return m.f[name] != nil }
