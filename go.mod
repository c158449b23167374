module github.com/leasefence/lab

go 1.26
