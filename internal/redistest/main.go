package redistest

import "os"

// StartMain starts a standalone server for a whole test binary, from TestMain, where there
// is no testing.TB (Example functions use it). The returned stop kills the server and
// removes its directory; call it before the binary exits. A missing redis-server is an
// error that says how to install it.
func StartMain(opts ...Option) (s *Server, stop func(), err error) {
	bin, err := redisBinary()
	if err != nil {
		return nil, nil, err
	}
	sweepLeftoversOnce()
	dir, err := os.MkdirTemp("", "dlock-redistest-main-")
	if err != nil {
		return nil, nil, err
	}
	cfg := newConfig(opts)
	s = &Server{bin: bin, dir: dir, password: cfg.password, userArgs: append([]string(nil), cfg.args...), tls: cfg.tls}
	stop = func() {
		s.cleanup()
		_ = os.RemoveAll(dir)
	}
	if err := s.startFresh(); err != nil {
		stop()
		return nil, nil, err
	}
	return s, stop, nil
}
