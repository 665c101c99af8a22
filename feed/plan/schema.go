package plan

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/feed"
)

// planSchema checks that every file holds the selected columns with the
// same types and returns their schema, label last. CSV column types are
// widened across CSV files first (int64 < float64 < utf8); a column is
// nullable when it is in any file. A string column some Parquet files
// dictionary-encode and others do not is read as plain strings from all.
func planSchema(infos []*fileInfo, columns []string, label string) (*arrow.Schema, error) {
	projs := make([]*arrow.Schema, len(infos))
	for i, fi := range infos {
		if fi.schema == nil {
			continue // an empty CSV file has no columns to check
		}
		sel, err := feed.SelectColumns(feed.FieldNames(fi.schema), columns, label, fi.uri)
		if err != nil {
			return nil, err
		}
		projs[i] = feed.ProjectSchema(fi.schema, sel)
	}
	// Widen CSV types across CSV files with the same columns.
	var csvRef *arrow.Schema
	for i, fi := range infos {
		if fi.format != feed.FormatCSV || projs[i] == nil {
			continue
		}
		if csvRef == nil || !sameNames(csvRef, projs[i]) {
			if csvRef == nil {
				csvRef = projs[i]
			}
			continue
		}
		fields := csvRef.Fields()
		for j, f := range projs[i].Fields() {
			fields[j].Type = feed.WidenCSVType(fields[j].Type, f.Type)
		}
		csvRef = arrow.NewSchema(fields, nil)
	}
	for i, fi := range infos {
		if fi.format == feed.FormatCSV && projs[i] != nil && sameNames(csvRef, projs[i]) {
			projs[i] = csvRef
		}
	}

	undictionary(projs)

	var ref *arrow.Schema
	var refURI string
	var fields []arrow.Field
	for i, p := range projs {
		if p == nil {
			continue
		}
		if ref == nil {
			ref, refURI, fields = p, infos[i].uri, p.Fields()
			continue
		}
		if err := compareSchemas(ref, refURI, p, infos[i].uri); err != nil {
			return nil, err
		}
		for j, f := range p.Fields() {
			fields[j].Nullable = fields[j].Nullable || f.Nullable
		}
	}
	if ref == nil {
		return nil, fmt.Errorf("%w: no input file has any columns (every file is empty)", feed.ErrInput)
	}
	return arrow.NewSchema(fields, nil), nil
}

func sameNames(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.Fields() {
		if a.Field(i).Name != b.Field(i).Name {
			return false
		}
	}
	return true
}

// compareSchemas reports the first difference between two files' selected
// columns, naming both files and the column.
func compareSchemas(a *arrow.Schema, aURI string, b *arrow.Schema, bURI string) error {
	for i := 0; i < max(a.NumFields(), b.NumFields()); i++ {
		switch {
		case i >= a.NumFields():
			return fmt.Errorf("%w: schemas differ: %s has column %q (%s) that %s lacks", feed.ErrInput, bURI, b.Field(i).Name, b.Field(i).Type, aURI)
		case i >= b.NumFields():
			return fmt.Errorf("%w: schemas differ: %s has column %q (%s) that %s lacks", feed.ErrInput, aURI, a.Field(i).Name, a.Field(i).Type, bURI)
		}
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name {
			switch {
			case !b.HasField(fa.Name):
				return fmt.Errorf("%w: schemas differ: %s has column %q (%s) that %s lacks", feed.ErrInput, aURI, fa.Name, fa.Type, bURI)
			case !a.HasField(fb.Name):
				return fmt.Errorf("%w: schemas differ: %s has column %q (%s) that %s lacks", feed.ErrInput, bURI, fb.Name, fb.Type, aURI)
			}
			return fmt.Errorf("%w: schemas differ: column %d is %q in %s but %q in %s (same columns, different order)",
				feed.ErrInput, i, fa.Name, aURI, fb.Name, bURI)
		}
		if !arrow.TypeEqual(fa.Type, fb.Type) {
			return fmt.Errorf("%w: schemas differ: column %q is %s in %s but %s in %s", feed.ErrInput, fa.Name, fa.Type, aURI, fb.Type, bURI)
		}
	}
	return nil
}

// undictionary turns the dictionary columns of the schemas into their
// value type wherever another schema has that column with a type that is
// not a dictionary: a column is fed as a dictionary only when every file
// has it so.
func undictionary(schemas []*arrow.Schema) {
	plain := map[string]bool{}
	for _, s := range schemas {
		if s == nil {
			continue
		}
		for _, f := range s.Fields() {
			if f.Type.ID() != arrow.DICTIONARY {
				plain[f.Name] = true
			}
		}
	}
	for i, s := range schemas {
		if s == nil {
			continue
		}
		fields, changed := s.Fields(), false
		for j, f := range fields {
			if dt, ok := f.Type.(*arrow.DictionaryType); ok && plain[f.Name] {
				fields[j].Type, changed = dt.ValueType, true
			}
		}
		if changed {
			schemas[i] = arrow.NewSchema(fields, nil)
		}
	}
}
