package testtools

import (
	"sync"
	"time"
)

// Clock is a clock a test moves by hand, for code that takes a Now func
// (firstboot.Options.Now, mdserver.Options.Now): safe to read from the
// goroutines of the code under test while the test advances it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock showing t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d on.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
