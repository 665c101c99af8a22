package config

// Names of the keys that bound what one --archives archive may unpack
// on an executor's host.
const (
	KeyArchivesMaxBytes   = "spindle.archives.maxBytes"
	KeyArchivesMaxEntries = "spindle.archives.maxEntries"
)

// archiveKeys bound --archives unpacking, so that a zip or gzip bomb
// fails with an error naming the archive and the entry instead of
// filling the disk.
var archiveKeys = []Key{
	{Name: KeyArchivesMaxBytes, Default: "32g", Kind: Bytes, Min: 1 << 20, HasMin: true,
		Doc: "Most bytes the regular files of one --archives archive may unpack to on an executor's host; past it the job fails naming the archive and the entry."},
	{Name: KeyArchivesMaxEntries, Default: "1000000", Kind: Int, Min: 1, HasMin: true,
		Doc: "Most entries (files, directories, links) one --archives archive may hold; past it the job fails naming the archive and the entry."},
}
