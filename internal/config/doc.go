// Package config loads Spindle's job and daemon configuration.
//
// Configuration is a flat set of Spark-style properties ("key value" or
// "key=value" lines). Every key Spindle knows is declared once, with its
// default, kind and documentation, in the tables of keys*.go; defaults are
// applied in one place (Load), and conf/spindle-defaults.conf.template is
// checked against the same table by a test.
//
// Sources, lowest precedence first:
//
//	built-in defaults
//	$SPINDLE_CONF_DIR/spindle-defaults.conf
//	--properties-file FILE
//	--conf key=value (repeatable)
//	explicit command-line flags (--num-executors, ...)
//
// An unknown key is a warning that suggests the nearest known key; a value
// that does not parse is an error naming its source (file and line, or the
// flag) and the key.
package config
