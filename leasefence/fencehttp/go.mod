module github.com/leasefence/lab/leasefence/fencehttp

go 1.26.0

require (
	github.com/leasefence/lab/leasefence v0.0.0-00010101000000-000000000000
	github.com/leasefence/lab/leasefence/fencetoken v0.0.0-00010101000000-000000000000
)

require github.com/golang-jwt/jwt/v5 v5.3.1 // indirect

replace (
	github.com/leasefence/lab/leasefence => ../
	github.com/leasefence/lab/leasefence/fencetoken => ../fencetoken
)
