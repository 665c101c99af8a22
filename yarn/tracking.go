package yarn

import "sync"

// tracking holds the driver's web UI address until the application is
// submitted.
type tracking struct {
	mu  sync.Mutex
	url string
}

// SetTrackingURL makes url (the driver's web UI) the application's
// tracking URL, which the ResourceManager's web proxy serves. The driver
// calls it before it asks for executors, when the application is
// submitted.
func (c *ClusterManager) SetTrackingURL(url string) {
	c.track.mu.Lock()
	c.track.url = url
	c.track.mu.Unlock()
}

func (c *ClusterManager) trackingURL() string {
	c.track.mu.Lock()
	defer c.track.mu.Unlock()
	return c.track.url
}
