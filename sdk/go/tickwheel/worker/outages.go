package worker

// What a broken or hostile server can make the worker log, kept to a few
// bounded lines: an outage of the stream is a line when it begins, a few
// while it lasts and one when it ends (outageLog, as the Python worker's
// tickwheel.shared.outages); a protocol breach a server repeats at will is
// a line of each kind a minute (limited); a server's text in any line is
// one printable line of at most saidChars characters with the credential
// masked (said).

import (
	"context"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	// stillEvery is the time from an outage's first line to its first
	// "still failing" line, and how often a limited kind is logged at most.
	stillEvery = time.Minute
	// stillAtMost bounds the gaps between "still failing" lines: they double
	// from stillEvery (1, 2, 4, 8 minutes: lines at 1, 3, 7, 15 minutes) up
	// to this.
	stillAtMost = 15 * time.Minute
	// saidChars is the most characters of a server's text a log line repeats.
	saidChars = 300
)

// said is text from a server fit for a log line: its first line, printable,
// at most saidChars characters (then "..."), the worker's credential
// masked (a server may echo it).
func said(text, credential string) string {
	// A server's text may run to megabytes: look at what a line can show.
	if limit := 4 * (saidChars + len(credential) + 1); len(text) > limit {
		text = text[:limit]
	}
	if i := strings.IndexAny(text, "\r\n"); i >= 0 {
		text = text[:i]
	}
	if credential != "" {
		text = strings.ReplaceAll(text, credential, "***")
	}
	var b strings.Builder
	n := 0
	for _, r := range text {
		if n == saidChars {
			b.WriteString("...")
			break
		}
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// outageLog logs the failures of the worker's streams through an outage of
// its server: one WARNING when the outage begins (what failed and why),
// "still failing" WARNINGs stillEvery later then after gaps doubling up to
// stillAtMost, DEBUG for the failures in between, and one INFO with its
// duration when a stream lasted a heartbeat interval (ok). A relapse within
// stillEvery of the last WARNING is DEBUG, and so is its recovery. Used by
// Run's goroutine only.
type outageLog struct {
	log *slog.Logger
	now func() time.Time
	// When the current outage began; zero when none is on.
	downSince time.Time
	warnedAt  time.Time
	gap       time.Duration
	announced bool
	failures  int
}

func (o *outageLog) down() bool { return !o.downSince.IsZero() }

// failed logs that what ("connecting", "the stream") failed, with why.
func (o *outageLog) failed(what, why string, attrs ...any) {
	now := o.now()
	o.failures++
	switch {
	case o.downSince.IsZero():
		o.downSince, o.failures, o.gap = now, 1, stillEvery
		if !o.warnedAt.IsZero() && now.Sub(o.warnedAt) < stillEvery {
			o.announced = false
			o.log.Debug(what+" failed again; reconnecting", append([]any{"error", why}, attrs...)...)
			return
		}
		o.announced, o.warnedAt = true, now
		o.log.Warn(what+" failed, server unavailable; reconnecting", append([]any{"error", why}, attrs...)...)
	case o.warnedAt.IsZero() || now.Sub(o.warnedAt) >= o.gap:
		if o.announced {
			o.gap = min(2*o.gap, stillAtMost)
		}
		o.announced, o.warnedAt = true, now
		o.log.Warn("still failing, server unavailable; reconnecting", append([]any{
			"for", now.Sub(o.downSince).Round(time.Second).String(), "failures", o.failures, "last", what, "error", why,
		}, attrs...)...)
	default:
		o.log.Debug(what+" failed; reconnecting", append([]any{"error", why}, attrs...)...)
	}
}

// ok logs the end of the outage, if one is on.
func (o *outageLog) ok() {
	if o.downSince.IsZero() {
		return
	}
	level := slog.LevelDebug
	if o.announced {
		level = slog.LevelInfo
	}
	o.log.Log(context.Background(), level, "recovered",
		"after", o.now().Sub(o.downSince).Round(time.Second).String(), "failures", o.failures)
	o.downSince, o.failures = time.Time{}, 0
}

// limited rate-limits the lines a server causes at will, one per message it
// sends (a duplicate assignment, one beyond the credit, a second welcome, a
// drain): each kind at its level at most once a stillEvery, the rest DEBUG,
// counted in the next line of that kind. Guarded by the Worker's mutex.
type limited struct {
	now    func() time.Time
	saidAt map[string]time.Time
	unsaid map[string]int
}

// log logs msg of kind at level, or at DEBUG when a line of kind was logged
// less than stillEvery ago.
func (l *limited) log(logger *slog.Logger, kind string, level slog.Level, msg string, attrs ...any) {
	now := l.now()
	if at, ok := l.saidAt[kind]; ok && now.Sub(at) < stillEvery {
		l.unsaid[kind]++
		logger.Debug(msg, attrs...)
		return
	}
	l.saidAt[kind] = now
	if n := l.unsaid[kind]; n > 0 {
		delete(l.unsaid, kind)
		attrs = append(attrs, "more_at_debug", n)
	}
	logger.Log(context.Background(), level, msg, attrs...)
}
