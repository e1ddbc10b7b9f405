// Package webui is the first-boot web page of the admin listener: the
// fleet as a table (/ui/: counts per state, filter, sort, pages) and one
// instance's timeline (/ui/instances/{name}: its host name and addresses,
// stages, events with the fetches, errors), both updating live over
// server-sent events (/ui/stream), and what an instance's guest is served
// (/ui/instances/{name}/served: the admin API's preview, served.go).
//
// The pages are rendered on the server with html/template (everything
// shown comes from guests and spec authors, and is escaped as such);
// templates, CSS and the little JavaScript that follows the stream are
// embedded. The page works without JavaScript, only not live.
//
// The data comes from a Source, which the guests' handler
// (*mdserver.Handler) is; the admin handler mounts the UI under
// /ui/ (admin.NewHandler). The UI authenticates on its own: the admin
// API's bearer token (Options.Bearer), or a session cookie that its
// login form sets once the admin token is posted — a browser cannot send
// a bearer header when it navigates. See auth.go.
package webui
