// Package admin is the metadata server's administration API: an HTTP
// handler that lists, shows, stores, deletes and previews instances in a
// registry.Store (bearer token, optionally over mutual TLS), its JSON wire
// types, and the TLS listener configuration. `vminit instances` is its
// client. Guests never reach it: serve it on its own listener.
package admin
