package guard

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The conversions of one reply, as go-redis's reader makes them (ReadString, ReadInt,
// ReadFloat, ReadBool). A script's replies are Lua's: strings, integers, nils, nested
// arrays, and errors; a float comes as a string.

func text(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", unexpected(v, "a string")
}

func integer(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, unexpected(v, "an integer")
}

func float(v any) (float64, error) {
	switch x := v.(type) {
	case string:
		return strconv.ParseFloat(x, 64)
	case int64:
		return float64(x), nil
	}
	return 0, unexpected(v, "a float")
}

func boolean(v any) (bool, error) {
	s, err := text(v)
	return s == "OK" || s == "1" || s == "true", err
}

// duration is a TTL reply: -1 and -2 as they are, other values in the command's unit.
func duration(c *redis.DurationCmd, v any) (time.Duration, error) {
	n, err := integer(v)
	if err != nil || n == -1 || n == -2 {
		return time.Duration(n), err
	}
	unit, _ := precision(c)
	return time.Duration(n) * unit, nil
}

func array(v any) ([]any, error) {
	if x, ok := v.([]any); ok {
		return x, nil
	}
	return nil, unexpected(v, "an array")
}

// each converts every element of an array; a nil element is zero, as go-redis makes it.
func each[T any](conv func(any) (T, error), zero T) func(any) ([]T, error) {
	return func(v any) ([]T, error) {
		a, err := array(v)
		if err != nil {
			return nil, err
		}
		out := make([]T, len(a))
		for i, e := range a {
			if e == nil {
				out[i] = zero
				continue
			}
			if out[i], err = conv(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

// pairs converts a flat array of field, value pairs (a map in RESP2, as a script sees it).
func pairs[T any](conv func(any) (T, error)) func(any) (map[string]T, error) {
	return func(v any) (map[string]T, error) {
		a, err := array(v)
		if err != nil {
			return nil, err
		}
		if len(a)%2 != 0 {
			return nil, unexpected(v, "field and value pairs")
		}
		out := make(map[string]T, len(a)/2)
		for i := 0; i < len(a); i += 2 {
			k, err := text(a[i])
			if err != nil {
				return nil, err
			}
			if out[k], err = conv(a[i+1]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

// zslice converts members with their scores: a flat array, or an array of pairs.
func zslice(v any) ([]redis.Z, error) {
	a, err := array(v)
	if err != nil {
		return nil, err
	}
	if len(a) > 0 {
		if _, nested := a[0].([]any); !nested {
			return zflat(a)
		}
	}
	out := make([]redis.Z, len(a))
	for i, e := range a {
		p, ok := e.([]any)
		if !ok || len(p) != 2 {
			return nil, unexpected(e, "a member and its score")
		}
		if out[i], err = zpair(p[0], p[1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func zflat(a []any) ([]redis.Z, error) {
	if len(a)%2 != 0 {
		return nil, fmt.Errorf("dlock: %d elements in a sorted set's reply, wanted a multiple of 2", len(a))
	}
	out := make([]redis.Z, len(a)/2)
	for i := range out {
		var err error
		if out[i], err = zpair(a[2*i], a[2*i+1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func zpair(member, score any) (redis.Z, error) {
	m, err := text(member)
	if err != nil {
		return redis.Z{}, err
	}
	s, err := float(score)
	return redis.Z{Member: m, Score: s}, err
}

func unexpected(v any, want string) error {
	return fmt.Errorf("dlock: a reply %v (%T) where %s was expected", v, v, want)
}
