package throttle

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bandwidth is a rate in bytes per second that parses from configuration:
// a plain number of bytes, or a number with a unit: B, KB/MB/GB/TB (powers of
// 1000), KiB/MiB/GiB/TiB or K/M/G/T (powers of 1024), optionally followed by
// "/s". "0" or "" means unlimited. It implements encoding.TextUnmarshaler, so
// caarlos0/env and flag.TextVar parse it directly.
type Bandwidth int64

var units = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// ParseBandwidth parses a Bandwidth (see its documentation).
func ParseBandwidth(s string) (Bandwidth, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(t, "/s")
	if t == "" {
		return 0, nil
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := units[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("bandwidth %q: want bytes per second such as 1048576, 4MiB or 10MB", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("bandwidth %q: %w", s, err)
	}
	b := math.Round(v * mult)
	if b > math.MaxInt64 {
		return 0, fmt.Errorf("bandwidth %q: too large", s)
	}
	return Bandwidth(b), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *Bandwidth) UnmarshalText(text []byte) error {
	v, err := ParseBandwidth(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalText implements encoding.TextMarshaler (plain bytes per second).
func (b Bandwidth) MarshalText() ([]byte, error) {
	return []byte(strconv.FormatInt(int64(b), 10)), nil
}

// String is the rate in bytes per second, or "unlimited".
func (b Bandwidth) String() string {
	if b == 0 {
		return "unlimited"
	}
	return strconv.FormatInt(int64(b), 10) + " B/s"
}
