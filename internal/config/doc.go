// Package config reads agentgate's environment once into a typed, validated
// struct (see CONTRACTS.md for every variable).
package config
