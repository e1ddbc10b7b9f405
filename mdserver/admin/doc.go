// Package admin is the metadata server's administration API: an HTTP
// handler that lists, shows, stores, deletes and previews instances in a
// registry.Store, and reports their first boots (one instance's, the
// fleet's filtered, or a stream of its changes: boots.go), behind a bearer
// token, optionally over mutual TLS; its JSON wire types; and the TLS
// listener configuration. The operations themselves are Local, which the
// handler answers with and an in-process caller holding the store uses
// directly; Client does the same over HTTP, and API is what both do.
// `vminit instances` works through API: Client against a server, Local
// against a cluster's Instances. Guests never reach the handler: serve it
// on its own listener.
package admin
