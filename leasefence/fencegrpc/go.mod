module github.com/leasefence/lab/leasefence/fencegrpc

go 1.26.0

require (
	github.com/leasefence/lab/leasefence v0.0.0-00010101000000-000000000000
	github.com/leasefence/lab/leasefence/fencetoken v0.0.0-00010101000000-000000000000
	google.golang.org/genproto/googleapis/rpc v0.0.0-20241202173237-19429a94021a
	google.golang.org/grpc v1.70.0
	google.golang.org/protobuf v1.35.2
)

require (
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	golang.org/x/net v0.32.0 // indirect
	golang.org/x/sys v0.28.0 // indirect
	golang.org/x/text v0.21.0 // indirect
)

replace (
	github.com/leasefence/lab/leasefence => ../
	github.com/leasefence/lab/leasefence/fencetoken => ../fencetoken
)
