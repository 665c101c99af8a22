// Package textdist measures how far apart two strings are, so error
// messages can suggest the key or column a user probably meant.
package textdist
