package config

// KeyModelsDir names the model store (package model/store).
const KeyModelsDir = "spindle.models.dir"

// modelKeys locate the model store.
var modelKeys = []Key{
	{Name: KeyModelsDir, Default: "", Kind: String, ReadBy: ReadBySubmit | ReadByModel,
		Doc: "The model store: a directory (local path, file:// or hdfs:// URI) holding models as NAME/VERSION/model.onnx with a manifest.json. spindle model export --name, list and show use it, and jobs get it as SPINDLE_MODELS_DIR so that spindle.model.save publishes there. Empty: commands need a STORE/NAME reference."},
}
