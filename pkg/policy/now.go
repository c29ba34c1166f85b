package policy

import (
	"errors"
	"fmt"
	"time"
)

// NowGranularityKey is where a set declares how finely its rules see the
// time (input.now), under data.gpuadmit.config: a Go duration such as
// "1m" or "1h", at least a second.
const NowGranularityKey = "nowGranularity"

// minNowGranularity is the finest time a policy may see: finer, every pod
// would have an input of its own and the decision memo would never answer.
const minNowGranularity = time.Second

// errNoGranularity is returned for a set that reads input.now without
// declaring how finely.
var errNoGranularity = errors.New("the set reads input.now (or input whole) but declares no data.gpuadmit.config." +
	NowGranularityKey + `: declare how finely its rules see the time, e.g. nowGranularity: "1m" in data.yaml`)

// nowGranularity is the granularity the set's data declares, checked
// whether or not a rule reads input.now; zero when none reads it.
func nowGranularity(docs map[string]any, reads bool) (time.Duration, error) {
	raw, declared := configValue(docs, NowGranularityKey)
	if !declared {
		if reads {
			return 0, errNoGranularity
		}
		return 0, nil
	}
	s, ok := raw.(string)
	if !ok {
		return 0, fmt.Errorf("data.gpuadmit.config.%s is %v, want a duration such as \"1m\"", NowGranularityKey, raw)
	}
	g, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("data.gpuadmit.config.%s: %w", NowGranularityKey, err)
	}
	if g < minNowGranularity {
		return 0, fmt.Errorf("data.gpuadmit.config.%s is %s, want at least %s", NowGranularityKey, g, minNowGranularity)
	}
	if !reads {
		return 0, nil
	}
	return g, nil
}

// configValue is data.gpuadmit.config[key] of the set's data documents.
func configValue(docs map[string]any, key string) (any, bool) {
	gpuadmit, _ := docs["gpuadmit"].(map[string]any)
	config, _ := gpuadmit["config"].(map[string]any)
	v, ok := config[key]
	return v, ok
}

// Now is input.now for a decision at t: t truncated to the set's
// NowGranularity, in nanoseconds since the Unix epoch (what time.now_ns()
// returned, and what OPA's time builtins take); zero, and absent from the
// input, when the set does not read input.now. Granules are multiples of
// the granularity since the Unix epoch, so an hour's start on the hour and
// a day's at midnight UTC.
func (s *Set) Now(t time.Time) int64 {
	g := s.NowGranularity.Nanoseconds()
	if g <= 0 {
		return 0
	}
	ns := t.UnixNano()
	return ns - ((ns%g)+g)%g // down, before 1970 too
}
