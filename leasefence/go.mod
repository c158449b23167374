module github.com/leasefence/lab/leasefence

go 1.26.0
