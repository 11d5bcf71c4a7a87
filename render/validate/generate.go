package validate

//go:generate go run ./internal/gencrds -out crds
